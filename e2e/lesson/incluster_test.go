package lesson

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// operatorImage is deploy.yaml's image, as it is: in the lesson's registry,
// which asks for credentials.
const operatorImage = "registry.iximiuz.com/tienda/operador-promociones:v1"

// The lesson's second half for real, on node-01 and node-02: the operator's own image
// pushed to the cluster's registry and pulled by the kubelet with the
// lesson's credentials, the stumbles on the way shown; run by containerd as
// two Pods with leader election, under the ServiceAccount of manifiestos/,
// first without its RBAC and then with it; the web pods, of the default
// image, Ready through their real probe; the page fetched through the
// Service, and seen in a real browser; and the garbage collector removing
// real pods.
func TestLessonInCluster(t *testing.T) {
	l := newLessonOnRealNodes(t)
	manifest := func(f string) string { return filepath.Join(l.Root, "manifiestos", f) }
	l.removeOperatorAtCleanup()
	l.Kubectl("delete", "--ignore-not-found", "-f", manifest("rbac.yaml"))
	_ = suite.ClusterSh("node", "ctr", "images", "rm", operatorImage).Run() // a node that never pulled it

	l.Step("4", "the registry is the meeting point: the credentials, then sa.yaml and deploy.yaml as they are, before the push")
	l.createPullSecret("default")
	l.Kubectl("apply", "-f", manifest("sa.yaml"))
	l.Kubectl("apply", "-f", manifest("deploy.yaml"))
	l.waitForPullRefused("not found")
	l.Logf("before the push, the kubelet finds no such image: the image \"exists\" only where it was built")

	l.pushOperatorImage()
	l.Kubectl("delete", "secret", "registry-credentials")
	refusals := l.registryRefusals()
	l.Kubectl("delete", "pods", "-l", "app=operador-promociones", "--wait=false")
	l.waitForPullRefused("authorization failed")
	if n := l.registryRefusals(); n <= refusals {
		t.Errorf("the registry's log shows no 401 to containerd for the pulls without the secret (%d before, %d after)", refusals, n)
	}
	l.Logf("pushed, but without the secret: the registry answers 401, and the kubelet is refused")

	l.createPullSecret("default")
	l.Kubectl("delete", "pods", "-l", "app=operador-promociones", "--wait=false")

	l.Step("5", "the operator is no longer an administrator: kubectl logs -l app=operador-promociones")
	pods := l.waitForOperatorPods("default", 2)
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "ejemplos", "rebajas-verano.yaml"))
	l.Eventually("the logs show the API server refusing the ServiceAccount", func() error {
		logs := l.Kubectl("logs", "-l", "app=operador-promociones", "--tail=-1")
		for _, want := range []string{"operador-promociones arrancando", `is forbidden: User \"` + framework.OperatorUser + `\"`} {
			if !strings.Contains(logs, want) {
				return fmt.Errorf("no %q in:\n%s", want, logs)
			}
		}
		return nil
	})
	if _, err := l.TryKubectl("get", "deployment", framework.LessonName); err == nil {
		t.Errorf("the Deployment %s exists: the operator acted without permissions", framework.LessonName)
	}

	l.Step("6", "kubectl apply -f manifiestos/rbac.yaml: it reconciles, without a restart")
	l.Kubectl("apply", "-f", manifest("rbac.yaml"))
	l.Kubectl("apply", "-f", manifest("")) // and the rest of manifiestos/: the metrics' roles, the users', the CRD's guard
	l.waitForRow("3", "3", "Listo")
	if now := l.waitForOperatorPods("default", 2); !slices.Equal(now, pods) {
		t.Errorf("the operator's pods changed from %v to %v: something restarted them", pods, now)
	}
	if restarts := l.Kubectl("get", "pods", "-l", "app=operador-promociones", "-o", "jsonpath={.items[*].status.containerStatuses[0].restartCount}"); restarts != "0 0" {
		t.Errorf("restart counts %q, want 0 0", restarts)
	}
	logs := l.Kubectl("logs", "-l", "app=operador-promociones", "--tail=-1")
	for _, want := range []string{"Successfully acquired lease", `kind source: *main.Promocion`, `kind source: *v1.Deployment`,
		`kind source: *v1.Service`, `kind source: *v1.ConfigMap`, "Starting workers", "Created ConfigMap rebajas-verano-html, Deployment rebajas-verano and Service rebajas-verano"} {
		if !strings.Contains(logs, want) {
			t.Errorf("kubectl logs -l app=operador-promociones lacks %q", want)
		}
	}
	l.Logf("the leader's log: arrancando, the four EventSources, the workers, the children created")
	// The downward API passes the container's memory limit; the runtime's is
	// nine tenths of it less 32 MiB for the binary's pages, and half at least.
	limit := resource.MustParse(l.Kubectl("get", "pods", "-l", "app=operador-promociones", "-o", "jsonpath={.items[0].spec.containers[0].resources.limits.memory}"))
	v := limit.Value()
	if want := max(v-v/10-32<<20, v/2); !strings.Contains(logs, fmt.Sprintf(`"GOMEMLIMIT": %d`, want)) {
		t.Errorf("kubectl logs -l app=operador-promociones lacks the Go memory limit %d, for a limit of %s", want, limit.String())
	}
	l.Logf("the Go memory limit is set from the container's %s", limit.String())

	l.Step("6b", "the web pods are real: Ready through their readiness probe, on the real nodes, run by containerd")
	l.waitForWebPods(3, framework.LessonBanner)
	for _, pod := range strings.Fields(l.Kubectl("get", "pods", "-l", "tienda.example.com/promocion="+framework.LessonName, "-o", "jsonpath={.items[*].metadata.name}")) {
		if log := l.Kubectl("logs", pod); !strings.Contains(log, `"GET / HTTP/1.1" 200`) || !strings.Contains(log, "kube-probe") {
			t.Errorf("pod %s's nginx log shows no probe served:\n%s", pod, log)
		}
	}
	l.Logf("each pod's nginx logged the kubelet's probes (kube-probe), answered 200")
	l.checkPage(framework.LessonBanner)
	l.noTokenInWebPods(framework.LessonName)

	l.Step("7", "the leader's Pod deleted: the Lease passes to another replica, and the Deployment makes a third")
	old := l.leaseHolder("default")
	l.Kubectl("delete", "pod", old, "--wait=false")
	deleted := time.Now()
	var next string
	l.Eventually("another replica holds the Lease", func() error {
		if next = l.leaseHolder("default"); next == "" || next == old {
			return fmt.Errorf("holder %q", next)
		}
		return nil
	})
	role := "the standby"
	if !slices.Contains(pods, next) {
		role = "the Deployment's new Pod, which asked before the standby's next retry"
	}
	l.Logf("FIGURE leader handover after deleting its Pod: %s, to %s (%s)", time.Since(deleted).Round(time.Millisecond), next, role)
	after := l.waitForOperatorPods("default", 2)
	if slices.Contains(after, old) {
		t.Errorf("the deleted leader %s is still among %v", old, after)
	}
	l.Kubectl("delete", "deployment", framework.LessonName)
	l.waitForRow("3", "3", "Listo")
	l.Logf("the new leader recreated the Deployment")

	l.Step("7b", "a drain evicts one replica at a time: the PodDisruptionBudget refuses the second")
	l.Eventually("the PodDisruptionBudget allows one disruption", func() error {
		if got := l.Kubectl("get", "pdb", "operador-promociones", "-o", "jsonpath={.status.disruptionsAllowed}"); got != "1" {
			return fmt.Errorf("disruptionsAllowed %q", got)
		}
		return nil
	})
	evict := func(pod string) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default"}}
		return l.C.SubResource("eviction").Create(context.Background(), p, &policyv1.Eviction{ObjectMeta: p.ObjectMeta})
	}
	if err := evict(after[0]); err != nil {
		t.Fatalf("evicting %s: %v", after[0], err)
	}
	if err := evict(after[1]); !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "disruption budget") {
		t.Errorf("evicting the second replica, %s: %v, want a refusal by the disruption budget", after[1], err)
	}
	l.waitForOperatorPods("default", 2)
	l.Logf("the first eviction passed, the second was refused (429) until a new replica was Ready")

	l.Step("8", "a new banner rolls the pods, and the Service serves the new page")
	l.Kubectl("patch", "promocion", framework.LessonName, "--type=merge", "-p", `{"spec":{"banner":"Rebajas de invierno"}}`)
	l.waitForWebPods(3, "Rebajas de invierno")
	l.checkPage("Rebajas de invierno")

	l.Step("8b", "a hostile banner is shown as text, in a real browser")
	// Both mark the page if they run: an alert() would block headless Chromium.
	const hostile = `<img src=x onerror="document.body.dataset.xss=1"><script>document.body.dataset.xss=2</script>`
	l.Kubectl("patch", "promocion", framework.LessonName, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"banner":%q}}`, hostile))
	l.waitForWebPods(3, hostile)
	l.checkInBrowser(hostile)

	l.Step("9", "kubectl delete promocion: the garbage collector removes the real pods")
	l.Kubectl("delete", "promocion", framework.LessonName)
	l.Eventually("no pod, and no container on the nodes", func() error {
		if pods := l.Kubectl("get", "pods", "-l", "tienda.example.com/promocion="+framework.LessonName, "-o", "name"); pods != "" {
			return fmt.Errorf("pods left: %s", pods)
		}
		if c := l.nodeContainers(framework.LessonName); len(c) > 0 {
			return fmt.Errorf("containers left on the nodes: %v", c)
		}
		return nil
	})
}

// removeOperatorAtCleanup removes, when the test ends, what running the
// operator in the cluster took: manifiestos/ but the CRD, and the pull secret.
func (l *lesson) removeOperatorAtCleanup() {
	l.T.Cleanup(func() {
		for _, f := range []string{"deploy.yaml", "rbac.yaml", "sa.yaml", "metrics.yaml", "roles.yaml", "protect-crd.yaml"} {
			_, _ = l.TryKubectl("delete", "--ignore-not-found", "-f", filepath.Join(l.Root, "manifiestos", f))
		}
		_, _ = l.TryKubectl("delete", "secret", "--ignore-not-found", "registry-credentials")
	})
}

// leaseHolder is the Pod that holds the operator's Lease in ns, or "".
func (l *lesson) leaseHolder(ns string) string {
	holder, _ := l.TryKubectl("get", "lease", "operador-promociones", "-n", ns, "-o", "jsonpath={.spec.holderIdentity}")
	return strings.Split(holder, "_")[0]
}

// pushOperatorImage builds the operator's image, as make image does, and
// pushes it to the cluster's registry as deploy.yaml names it, as make push does.
func (l *lesson) pushOperatorImage() {
	l.T.Helper()
	if out, err := suite.ClusterSh("push", l.OperatorImage(operatorImage), operatorImage).CombinedOutput(); err != nil {
		l.T.Fatalf("hack/cluster.sh push (make push): %v\n%s", err, out)
	}
}

// createPullSecret creates deploy.yaml's imagePullSecret, registry-credentials,
// in the operator's namespace ns (default in the lesson), with the cluster
// registry's credentials, as the lesson's playground has it.
func (l *lesson) createPullSecret(ns string) {
	l.T.Helper()
	l.Kubectl("delete", "secret", "--ignore-not-found", "registry-credentials", "-n", ns) // one left by a test that failed
	user, password, _ := strings.Cut(strings.TrimSpace(framework.ReadFile(l.T, filepath.Join(suite.ClusterDir, "registry", "credentials"))), ":")
	l.Kubectl("create", "secret", "docker-registry", "registry-credentials", "--docker-server=registry.iximiuz.com",
		"--docker-username="+user, "--docker-password="+password, "-n", ns)
}

// waitForPullRefused waits until every operator Pod waits in ImagePullBackOff,
// the kubelet's events for it saying why in words containing why.
func (l *lesson) waitForPullRefused(why string) {
	l.T.Helper()
	l.Eventually(fmt.Sprintf("the operator's Pods in ImagePullBackOff: %s", why), func() error {
		out := l.Kubectl("get", "pods", "-l", "app=operador-promociones", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].state.waiting.reason} {.metadata.deletionTimestamp}{"\n"}{end}`)
		var waiting int
		for line := range strings.SplitSeq(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 3 { // on its way out
				continue
			}
			if len(f) != 2 || f[1] != "ImagePullBackOff" {
				return fmt.Errorf("pods:\n%s", out)
			}
			events := l.Kubectl("get", "events", "--field-selector", "reason=Failed,involvedObject.name="+f[0], "-o", "jsonpath={.items[*].message}")
			if !strings.Contains(events, why) {
				return fmt.Errorf("pod %s's events: %s", f[0], events)
			}
			waiting++
		}
		if waiting != 2 {
			return fmt.Errorf("pods:\n%s", out)
		}
		l.Logf("%s", l.Kubectl("get", "pods", "-l", "app=operador-promociones"))
		return nil
	})
}

// registryRefusals counts the registry's answers of 401 to containerd.
func (l *lesson) registryRefusals() int {
	log := framework.ReadFile(l.T, filepath.Join(suite.ClusterDir, "logs", "registry.log"))
	return len(regexp.MustCompile(`(?m)"HEAD /v2/tienda/operador-promociones/manifests/v1 HTTP/1.1" 401 .*containerd`).FindAllString(log, -1))
}

// applyYAML writes manifests to a file and applies it.
func (l *lesson) applyYAML(what, manifests string) {
	l.T.Helper()
	f := filepath.Join(l.Tmp, what+".yaml")
	if err := os.WriteFile(f, []byte(manifests), 0o644); err != nil {
		l.T.Fatal(err)
	}
	l.Kubectl("apply", "-f", f)
}

// waitForOperatorPods waits until the operator's Deployment in ns has n Pods,
// all Running and Ready through their probes on the real nodes, the first two
// on different nodes (deploy.yaml's topology spread), and returns their names.
func (l *lesson) waitForOperatorPods(ns string, n int) []string {
	l.T.Helper()
	var names []string
	l.Eventually(fmt.Sprintf("%d operator Pods Running and Ready in %s, on both real nodes", n, ns), func() error {
		out := l.Kubectl("get", "pods", "-n", ns, "-l", "app=operador-promociones", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}`)
		names = nil
		nodes := map[string]bool{}
		for line := range strings.SplitSeq(out, "\n") {
			f := strings.Fields(line)
			if len(f) != 4 || !framework.IsRealNode(f[1]) || f[2] != "Running" || f[3] != "True" {
				return fmt.Errorf("pods:\n%s", out)
			}
			names = append(names, f[0])
			nodes[f[1]] = true
		}
		if len(names) != n || (n > 1 && len(nodes) < 2) {
			return fmt.Errorf("pods:\n%s", out)
		}
		return nil
	})
	slices.Sort(names)
	return names
}

// waitForWebPods waits until rebajas-verano is Listo with n pods on the real nodes,
// every one Ready and serving the page of banner.
func (l *lesson) waitForWebPods(n int, banner string) {
	l.T.Helper()
	page := "<h1>" + html.EscapeString(banner) + "</h1>"
	l.Eventually(fmt.Sprintf("%d web pods Ready on the real nodes, the page showing %q, and Listo", n, banner), func() error {
		// Not made yet is not a failure: the operator may not lead yet.
		got, err := l.TryKubectl("get", "configmap", framework.LessonName+"-html", "-o", `jsonpath={.data.index\.html}`)
		switch {
		case err != nil:
			return err
		case !strings.Contains(got, page):
			return fmt.Errorf("the page is %q", got)
		}
		out := l.Kubectl("get", "pods", "-l", "tienda.example.com/promocion="+framework.LessonName, "-o",
			`jsonpath={range .items[*]}{.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status} {.metadata.annotations.tienda\.example\.com/pagina-sha256}{"\n"}{end}`)
		want, err := l.TryKubectl("get", "deployment", framework.LessonName, "-o", `jsonpath={.spec.template.metadata.annotations.tienda\.example\.com/pagina-sha256}`)
		if err != nil {
			return err
		}
		lines := strings.Split(out, "\n")
		for _, line := range lines {
			if f := strings.Fields(line); len(f) != 3 || !framework.IsRealNode(f[0]) || f[1] != "True" || f[2] != want {
				return fmt.Errorf("pods (node, Ready, page hash; want %s):\n%s", want, out)
			}
		}
		if len(lines) != n {
			return fmt.Errorf("%d pods", len(lines))
		}
		if f, err := l.TryKubectl("get", "promocion", framework.LessonName, "-o", "jsonpath={.status.fase}"); err != nil {
			return err
		} else if f != "Listo" {
			return fmt.Errorf("fase %s", f)
		}
		return nil
	})
}

// checkPage fetches the page through the Service twice: from node-01, at the
// Service's ClusterIP (kube-proxy's rules), and from here through `kubectl
// port-forward svc/rebajas-verano`, as the README tells a reader to.
func (l *lesson) checkPage(banner string) {
	l.T.Helper()
	want := "<h1>" + html.EscapeString(banner) + "</h1>"
	ip := l.Kubectl("get", "service", framework.LessonName, "-o", "jsonpath={.spec.clusterIP}")
	// kube-proxy follows the Service's endpoints a moment after the pods
	// change, so the ClusterIP may refuse, or reach a pod on its way out,
	// until it has caught up.
	l.Eventually(fmt.Sprintf("curl http://%s/ (the ClusterIP) on node-01 serves %s", ip, want), func() error {
		for range 5 { // the Service picks a pod each time: every one must serve it
			out, err := suite.ClusterSh("node", "curl", "-sS", "--max-time", "5", "http://"+ip+"/").CombinedOutput()
			if err != nil || !strings.Contains(string(out), want) {
				return fmt.Errorf("%w: %s", err, out)
			}
		}
		return nil
	})
	url, stop := l.portForward()
	defer stop()
	if page := framework.HTTPGet(l.T, url); !strings.Contains(page, want) {
		l.T.Fatalf("GET %s through kubectl port-forward: %q", url, page)
	}
	l.Logf("GET %s through kubectl port-forward svc/%s: %s", url, framework.LessonName, want)
}

// portForward runs `kubectl port-forward svc/rebajas-verano :80` and returns
// the page's URL on this machine, and a function that stops it.
func (l *lesson) portForward() (string, func()) {
	l.T.Helper()
	addr, stop := l.portForwardTo("svc/"+framework.LessonName, ":80")
	return "http://" + addr + "/", stop
}

// portForwardTo runs `kubectl port-forward TARGET :PORT` with the given
// arguments and returns the local address (127.0.0.1:port), and a function
// that stops it.
func (l *lesson) portForwardTo(args ...string) (string, func()) {
	l.T.Helper()
	cmd := exec.Command(l.KubectlBin, append([]string{"--kubeconfig", l.Kubeconfig, "port-forward"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		l.T.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.T.Fatal(err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	// "Forwarding from 127.0.0.1:41234 -> 8080"
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		stop()
		l.T.Fatalf("kubectl port-forward printed %q: %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return m[1], stop
}

// checkInBrowser loads the page in headless Chromium through kubectl
// port-forward: the heading must read the banner as text, no element of the
// banner may exist, and its script must not have run. The same check on the
// banner pasted unescaped into a page must see the script run, or the check
// proves nothing. A screenshot is kept in bin/e2e/.
func (l *lesson) checkInBrowser(banner string) {
	l.T.Helper()
	url, stop := l.portForward()
	defer stop()
	dom := l.chromium("--dump-dom", url)
	h1 := regexp.MustCompile(`(?s)<h1>(.*?)</h1>`).FindStringSubmatch(dom)
	if h1 == nil || html.UnescapeString(h1[1]) != banner {
		l.T.Errorf("the rendered heading is not the banner as text:\n%s", dom)
	}
	if strings.Contains(dom, "<img") || strings.Contains(dom, "data-xss") {
		l.T.Errorf("the banner became markup, or its script ran:\n%s", dom)
	}
	l.Logf("Chromium shows the heading %q as text; no <img>, no script ran", banner)

	unsafe := filepath.Join(l.Tmp, "unescaped.html")
	if err := os.WriteFile(unsafe, []byte("<!DOCTYPE html><html><body><h1>"+banner+"</h1></body></html>"), 0o644); err != nil {
		l.T.Fatal(err)
	}
	if control := l.chromium("--dump-dom", "file://"+unsafe); !strings.Contains(control, `data-xss=`) {
		l.T.Errorf("the same banner unescaped did not run its script, so the check above proves nothing:\n%s", control)
	}

	artifacts := filepath.Join(l.Root, "bin", "e2e")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		l.T.Fatal(err)
	}
	shot := filepath.Join(artifacts, "pagina-banner-hostil.png")
	l.chromium("--screenshot="+shot, "--window-size=900,300", url)
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		l.T.Errorf("no screenshot at %s: %v", shot, err)
	}
	l.Logf("screenshot: %s", shot)
}

// chromium runs headless Chromium, as root (so without its sandbox), with
// nothing reaching for the network beyond the page, and its profile and crash
// reports in a folder of the test's.
func (l *lesson) chromium(args ...string) string {
	l.T.Helper()
	home := l.T.TempDir()
	base := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-crash-reporter",
		"--user-data-dir=" + filepath.Join(home, "profile"), "--virtual-time-budget=3000"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium", append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		l.T.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, framework.LastLines(stderr.String(), 10))
	}
	return string(out)
}

// noTokenInWebPods checks that no web pod of promocion (in default) holds an
// API token: none in its spec, and none in its container's filesystem, where
// the kubelet would mount it (the namespace's ServiceAccount mounts one unless
// the pod says no).
func (l *lesson) noTokenInWebPods(promocion string) {
	l.T.Helper()
	const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	pods := strings.Fields(l.Kubectl("get", "pods", "-l", "tienda.example.com/promocion="+promocion, "-o", "jsonpath={.items[*].metadata.name}"))
	if len(pods) == 0 {
		l.T.Fatalf("no web pod of %s", promocion)
	}
	for _, pod := range pods {
		spec := l.Kubectl("get", "pod", pod, "-o", "jsonpath={.spec.automountServiceAccountToken} {.spec.volumes[*].projected.sources[*].serviceAccountToken.path} {.spec.containers[*].volumeMounts[*].mountPath}")
		if !strings.HasPrefix(spec, "false ") || strings.Contains(spec, "token") || strings.Contains(spec, tokenDir) {
			l.T.Errorf("pod %s: automountServiceAccountToken, token volumes and mounts: %q", pod, spec)
		}
		if out := l.Kubectl("exec", pod, "-c", "web", "--", "sh", "-c", "if [ -e "+tokenDir+" ]; then ls "+tokenDir+"; else echo none; fi"); out != "none" {
			l.T.Errorf("pod %s holds %s: %s", pod, tokenDir, out)
		}
	}
	l.Logf("no web pod holds an API token: none in their spec, none at %s in their containers", tokenDir)
}

// nodeContainers lists the containers on the real nodes of the pods of a Promocion.
func (l *lesson) nodeContainers(promocion string) []string {
	l.T.Helper()
	var mine []string
	for _, node := range framework.RealNodes {
		out, err := suite.ClusterSh("node", node, "ctr", "containers", "ls", "-q",
			`labels."io.kubernetes.pod.namespace"==default`).Output()
		if err != nil {
			l.T.Fatal(errors.Join(err, errors.New(string(out))))
		}
		for _, id := range strings.Fields(string(out)) {
			info, _ := suite.ClusterSh("node", node, "ctr", "containers", "info", id).Output()
			if strings.Contains(string(info), `"io.kubernetes.pod.name": "`+promocion+`-`) {
				mine = append(mine, node+"/"+id)
			}
		}
	}
	return mine
}
