package lesson

import (
	"context"
	"fmt"
	"net"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A team installs the operator with Helm, as charts/operador-promociones
// ships it, on the real nodes: pushed by make chart-push to an OCI registry on
// loopback and installed from there; the sample Listo and helm test fetching
// its page through its Service; helm upgrade to a new image under a load of
// Promociones rolls the operator and no shop (no web pod restarted, every
// Promocion Listo throughout, no write to a Promocion or a child); helm
// rollback to the first image; helm uninstall keeps the CRD, the
// Promociones, the shops serving and the API's kept objects; and a reinstall
// takes them back with zero writes, and then repairs what it must.
func TestHelm(t *testing.T) {
	const n = 30
	// An image of its own in the cluster's registry: TestLessonInCluster
	// starts from a registry without deploy.yaml's.
	const release, repository = "operador-promociones", "registry.iximiuz.com/tienda/helm/operador-promociones"
	const v1, v2 = repository + ":v1", repository + ":v2"
	l := newLessonOnRealNodes(t)
	h := l.newHelm()
	// What other tests applied from manifiestos/ would not be Helm's to take.
	for _, f := range []string{"deploy.yaml", "rbac.yaml", "sa.yaml", "metrics.yaml", "roles.yaml", "protect-crd.yaml"} {
		l.Kubectl("delete", "--ignore-not-found", "-f", filepath.Join(l.Root, "manifiestos", f))
	}
	l.removeOperatorAtCleanup()
	// The registry's credentials, in the namespace the operator will run in,
	// made first so that its Pods pull at once; helm install's
	// --create-namespace then finds it.
	system := l.systemNamespace()
	t.Cleanup(func() {
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "promocion", framework.LessonName)
		_, _ = h.try("uninstall", release, "-n", system, "--wait")
	})
	for _, ref := range []string{v1, v2} {
		if out, err := suite.ClusterSh("push", l.OperatorImage(operatorImage), ref).CombinedOutput(); err != nil {
			t.Fatalf("pushing the image as %s: %v\n%s", ref, err, out)
		}
	}
	l.createPullSecret(system)

	l.Step("helm 1", "make chart-push to an OCI registry on loopback, and helm install from there, as docs/helm.md says")
	repo := l.chartRegistry()
	l.mustMake("chart-push", "CHART_REPO=oci://"+repo+"/charts", "HELM_FLAGS=--plain-http", "CHART_DIST="+l.Tmp)
	chart := []string{"oci://" + repo + "/charts/operador-promociones", "--version", "0.1.0", "--plain-http"}
	if _, err := h.try(append([]string{"install", release, "-n", "default", "--set", "image.repository=" + repository}, chart...)...); err == nil ||
		!strings.Contains(err.Error(), "must not run in the namespace default") {
		t.Errorf("helm install -n default: %v, want a refusal that says why", err)
	}
	install := append([]string{"install", release, "-n", system, "--create-namespace", "--wait", "--timeout", "5m", "--set", "image.repository=" + repository}, chart...)
	h.run(install...)
	first := l.waitForOperatorPods(system, 2)
	l.editorOfDefaultCannotActAsOperator(l.editorOfDefault(), system)
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "ejemplos", "rebajas-verano.yaml"))
	l.waitForWebPods(3, framework.LessonBanner)
	// The test Pod runs in the Promocion's namespace, default, and succeeds
	// only if its Service served a page with a heading. (helm test --logs
	// looks for it in the release's namespace, so it is not asked for.)
	out := h.run("test", release, "-n", system)
	if !regexp.MustCompile(`operador-promociones-test-pagina\s[\s\S]*Phase:\s+Succeeded`).MatchString(out) {
		t.Errorf("helm test's Pod did not succeed:\n%s", out)
	}
	l.Logf("helm test fetched rebajas-verano's page through its Service, in default")

	l.Step("helm 2", "helm upgrade to a new image, under a load of Promociones: the operator rolls, no shop does")
	ns := l.Namespace("helm-carga")
	l.CreatePromociones(ns, n, 1)
	l.WaitListo(ns, n)
	shops := func() map[string]any {
		all := l.childrenOf(ns)
		all["pods of rebajas-verano"] = l.Kubectl("get", "pods", "-l", "tienda.example.com/promocion="+framework.LessonName, "-o",
			`jsonpath={range .items[*]}{.metadata.uid} {.status.containerStatuses[0].restartCount}{"\n"}{end}`)
		return all
	}
	before := shops()
	next := l.nextChartVersion(h, repo)
	stopWatching := l.watchListo(func() string {
		p := framework.Promocion("default", 0, 0)
		p.SetName(framework.LessonName)
		fase := ""
		if err := l.C.Get(context.Background(), client.ObjectKeyFromObject(p), p); err == nil {
			fase, _, _ = unstructured.NestedString(p.Object, "status", "fase")
		}
		if got := l.Listo(ns); got != n || fase != "Listo" {
			return fmt.Sprintf("%d of %d Listo, rebajas-verano %q", got, n, fase)
		}
		return ""
	})
	upgrading := time.Now()
	h.run(append([]string{"upgrade", release, "-n", system, "--wait", "--timeout", "5m", "--reuse-values", "--set", "image.tag=v2"}, next...)...)
	upgraded := l.waitForOperatorPods(system, 2)
	if images := l.Kubectl("get", "pods", "-n", system, "-l", "app=operador-promociones", "-o", "jsonpath={.items[*].spec.containers[0].image}"); images != v2+" "+v2 {
		t.Errorf("after the upgrade, the operator's images are %q, want %s twice", images, v2)
	}
	if slices.ContainsFunc(upgraded, func(p string) bool { return slices.Contains(first, p) }) {
		t.Errorf("the operator's Pods %v outlived the upgrade (before: %v)", upgraded, first)
	}
	l.waitForLeaderAmong(system, upgraded)
	time.Sleep(10 * time.Second) // the new leader's first pass over every Promocion
	if notListo := stopWatching(); len(notListo) > 0 {
		t.Errorf("Promociones left Listo during the upgrade:\n%s", strings.Join(framework.First(notListo, 10), "\n"))
	}
	l.AuditFlushed()
	if writes := l.shopWrites(framework.TeamOperatorUser, upgrading, ns); len(writes) > 0 {
		t.Errorf("the operator wrote to Promociones or their children during the upgrade:\n%s", framework.First(writes, 10))
	}
	if after := shops(); !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("the shops changed in the upgrade:\nbefore %v\nafter  %v", before, after)
	}
	l.Logf("upgraded to %s: the operator's Pods replaced, every Promocion Listo throughout, no shop written", v2)

	// Helm never changes a CRD once installed; the new chart's reaches the
	// cluster by the explicit step of docs/helm.md.
	if label := l.Kubectl("get", "crd", crdName, "-o", "jsonpath={.metadata.labels.tienda\\.example\\.com/chart}"); label != "" {
		t.Errorf("helm upgrade changed the CRD (label %q): Helm leaves crds/ alone after the install", label)
	}
	crds := filepath.Join(l.Tmp, "crds.yaml")
	if err := os.WriteFile(crds, []byte(h.run(append([]string{"show", "crds"}, next...)...)), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Kubectl("apply", "--server-side", "--force-conflicts", "-f", crds)
	if label := l.Kubectl("get", "crd", crdName, "-o", "jsonpath={.metadata.labels.tienda\\.example\\.com/chart}"); label != "0.2.0" {
		t.Errorf("after helm show crds | kubectl apply --server-side, the CRD's label is %q, want 0.2.0", label)
	}
	if got := l.Listo(ns); got != n {
		t.Errorf("%d of %d Promociones Listo after the CRD's upgrade", got, n)
	}
	l.Logf("the new chart's CRD applied by helm show crds | kubectl apply --server-side, and not by helm upgrade")

	l.Step("helm 3", "helm rollback to the first release")
	h.run("rollback", release, "1", "-n", system, "--wait", "--timeout", "5m")
	l.Eventually("the operator's Pods back on the first image", func() error {
		images := l.Kubectl("get", "pods", "-n", system, "-l", "app=operador-promociones", "-o", "jsonpath={.items[*].spec.containers[0].image}")
		if images != v1+" "+v1 {
			return fmt.Errorf("images %q", images)
		}
		return nil
	})
	l.waitForOperatorPods(system, 2)

	l.Step("helm 4", "helm uninstall: the CRD, the Promociones and the shops stay, serving")
	h.run("uninstall", release, "-n", system, "--wait")
	l.Eventually("no operator Pod", func() error {
		if pods := l.Kubectl("get", "pods", "-n", system, "-l", "app=operador-promociones", "-o", "name"); pods != "" {
			return fmt.Errorf("pods %s", pods)
		}
		return nil
	})
	l.Kubectl("get", "crd", "promociones.tienda.example.com")
	if got := l.Listo(ns); got != n {
		t.Errorf("%d of %d Promociones Listo after helm uninstall", got, n)
	}
	for _, kept := range []string{"validatingadmissionpolicy/operador-promociones-protect-crd", "validatingadmissionpolicybinding/operador-promociones-protect-crd",
		"clusterrole/promocion-editor", "clusterrole/promocion-viewer"} {
		if _, err := l.TryKubectl("get", kept); err != nil {
			t.Errorf("helm uninstall removed %s, which it should keep: %v", kept, err)
		}
	}
	l.checkPage(framework.LessonBanner)

	l.Step("helm 5", "helm install again: the operator takes its Promociones back with zero writes, and repairs what it must")
	reinstalled := time.Now()
	h.run(install...)
	l.waitForLeaderAmong(system, l.waitForOperatorPods(system, 2))
	time.Sleep(10 * time.Second) // the leader's first pass over every Promocion
	l.AuditFlushed()
	if writes := l.shopWrites(framework.TeamOperatorUser, reinstalled, ns); len(writes) > 0 {
		t.Errorf("the reinstalled operator wrote to Promociones or children that needed no change:\n%s", framework.First(writes, 10))
	}
	// It runs: a child deleted now comes back.
	cm := framework.Promocion(ns, 0, 1).GetName() + "-html"
	l.Kubectl("delete", "configmap", "-n", ns, cm)
	l.Eventually("the reinstalled operator recreates a deleted ConfigMap", func() error {
		_, err := l.TryKubectl("get", "configmap", "-n", ns, cm)
		return err
	})
	l.Logf("reinstalled: zero writes to %d converged Promociones, and a deleted ConfigMap recreated", n+1)
}

// The chart, rendered with a matrix of values, is what the API server
// accepts: each rendering passes a server-side dry run.
func TestHelmDryRun(t *testing.T) {
	l := newLesson(t)
	h := l.newHelm()
	for _, ns := range []string{"helm-tienda", "helm-outlet", "helm-operador"} {
		l.Namespace(ns)
	}
	for _, values := range [][]string{
		nil,
		{"namespaces={helm-tienda,helm-outlet}"},
		{"metrics.enabled=false"},
		{"metrics.certSecret=metrics-tls", "networkPolicy.enabled=true"},
		{"podDisruptionBudget.enabled=false", "replicas=1", "imagePullSecrets=null"},
		{"image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "webImage=registry.example.com/web/nginx:1.29"},
		{"nodeSelector.kubernetes\\.io/os=linux", "tolerations[0].key=dedicated", "tolerations[0].operator=Exists", "resources.limits.memory=512Mi"},
	} {
		args := []string{"template", "operador-promociones", filepath.Join(l.Root, "charts", "operador-promociones"), "-n", "helm-operador", "--include-crds", "--skip-tests"}
		for _, v := range values {
			args = append(args, "--set", v)
		}
		rendered := filepath.Join(l.Tmp, "rendered.yaml")
		if err := os.WriteFile(rendered, []byte(h.run(args...)), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := l.TryKubectl("apply", "--dry-run=server", "-f", rendered); err != nil {
			t.Errorf("with %v, the API server refused the chart: %v\n%s", values, err, out)
		}
	}
	l.Logf("the chart with %d sets of values passed the API server's dry run", 7)
}

// ----- helpers -----

const crdName = "promociones.tienda.example.com"

// nextChartVersion pushes to repo the chart as a next release would be: version
// 0.2.0, its CRD changed (a label, tienda.example.com/chart: 0.2.0), and
// returns its helm arguments. The label is taken off the CRD when the test ends.
func (l *lesson) nextChartVersion(h helmCLI, repo string) []string {
	l.T.Helper()
	l.T.Cleanup(func() { _, _ = l.TryKubectl("label", "crd", crdName, "tienda.example.com/chart-") })
	dir := filepath.Join(l.Tmp, "chart-0.2.0", "operador-promociones")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		l.T.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(l.Root, "charts", "operador-promociones"), filepath.Dir(dir)).CombinedOutput(); err != nil {
		l.T.Fatalf("copying the chart: %v\n%s", err, out)
	}
	edit := func(file, old, new string) {
		path := filepath.Join(dir, file)
		text := framework.ReadFile(l.T, path)
		if !strings.Contains(text, old) {
			l.T.Fatalf("%s has no %q", file, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(text, old, new, 1)), 0o644); err != nil {
			l.T.Fatal(err)
		}
	}
	edit("Chart.yaml", "\nversion: 0.1.0\n", "\nversion: 0.2.0\n")
	edit("crds/crd.yaml", "\n  name: "+crdName+"\n", "\n  name: "+crdName+"\n  labels:\n    tienda.example.com/chart: 0.2.0\n")
	h.run("package", dir, "-d", filepath.Dir(dir))
	h.run("push", filepath.Join(filepath.Dir(dir), "operador-promociones-0.2.0.tgz"), "oci://"+repo+"/charts", "--plain-http")
	return []string{"oci://" + repo + "/charts/operador-promociones", "--version", "0.2.0", "--plain-http"}
}

type helmCLI struct {
	l   *lesson
	bin string
}

// newHelm builds Helm (hack/helm.sh, cached) to run against the tests' cluster,
// with its configuration and caches in the test's folder.
func (l *lesson) newHelm() helmCLI {
	l.T.Helper()
	return helmCLI{l, l.hackPath("helm.sh")}
}

// hackPath runs one of hack/'s scripts that build a tool (cached) and print
// its path.
func (l *lesson) hackPath(script string) string {
	l.T.Helper()
	out, err := exec.Command(filepath.Join(l.Root, "hack", script)).Output()
	if err != nil {
		l.T.Fatalf("hack/%s: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

func (h helmCLI) try(args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+h.l.Kubeconfig, "HELM_CONFIG_HOME="+filepath.Join(h.l.Tmp, "helm"),
		"HELM_CACHE_HOME="+filepath.Join(h.l.Tmp, "helm-cache"), "HELM_DATA_HOME="+filepath.Join(h.l.Tmp, "helm-data"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\n%s%s", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func (h helmCLI) run(args ...string) string {
	h.l.T.Helper()
	out, err := h.try(args...)
	if err != nil {
		h.l.T.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	h.l.Logf("helm %s", strings.Join(args[:min(len(args), 3)], " "))
	return out
}

// chartRegistry starts the CNCF Distribution registry (the cluster's own
// binary) on a free port of loopback, in plain HTTP, for the test's life, and
// returns its address.
func (l *lesson) chartRegistry() string {
	l.T.Helper()
	dir := l.hackPath("node-binaries.sh")
	addr := framework.FreeAddresses(l.T, 1)[0]
	config := filepath.Join(l.Tmp, "chart-registry.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\nlog:\n  level: error\n", filepath.Join(l.Tmp, "chart-registry"), addr), 0o644); err != nil {
		l.T.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "registry"), "serve", config)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		l.T.Fatal(err)
	}
	l.T.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	l.Eventually("the chart registry listens on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
	return addr
}

// watchListo calls notListo every 200 ms until the function it returns is
// called, and that function returns what notListo said, when, each time it
// said something.
func (l *lesson) watchListo(notListo func() string) func() []string {
	var said []string
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if what := notListo(); what != "" {
				said = append(said, time.Now().Format(time.StampMilli)+": "+what)
			}
		}
	}()
	return func() []string {
		close(done)
		<-watched
		return said
	}
}

// waitForLeaderAmong waits until one of pods holds the operator's Lease in ns.
func (l *lesson) waitForLeaderAmong(ns string, pods []string) {
	l.T.Helper()
	l.Eventually(fmt.Sprintf("one of %v leads", pods), func() error {
		if h := l.leaseHolder(ns); !slices.Contains(pods, h) {
			return fmt.Errorf("the Lease's holder is %q", h)
		}
		return nil
	})
}

// shopWrites are the writes of user, the operator, since t to Promociones and
// their children, in ns and rebajas-verano's (its Lease and its Events apart).
func (l *lesson) shopWrites(user string, t time.Time, ns string) []framework.Request {
	return l.Audit(t, func(r framework.Request) bool {
		if r.User != user || strings.Contains(r.URI, "/leases") || strings.Contains(r.URI, "/events") {
			return false
		}
		return strings.Contains(r.URI, "/namespaces/"+ns+"/") || strings.Contains(r.URI, "/namespaces/default/") && strings.Contains(r.URI, framework.LessonName)
	})
}
