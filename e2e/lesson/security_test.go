package lesson

// What docs/security.md claims, on a real cluster: a Promocion cannot take over
// what is not the operator's, an install can be confined to namespaces, and
// neither removing the operator nor a slip of the hand loses the users' data.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// make runs a target of the Makefile on the tests' cluster, with their kubectl,
// writing dist/install.yaml into the test's folder rather than the checkout.
func (l *lesson) make(args ...string) (string, error) {
	cmd := exec.Command("make", append([]string{"--no-print-directory", "KUBECTL=" + l.KubectlBin,
		"INSTALLER=" + filepath.Join(l.Tmp, "install.yaml")}, args...)...)
	cmd.Dir = l.Root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+l.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (l *lesson) mustMake(args ...string) string {
	l.T.Helper()
	out, err := l.make(args...)
	if err != nil {
		l.T.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	l.Logf("make %s", strings.Join(args, " "))
	return out
}

// Permission to create a Promocion is not permission to take over what it is
// named after. With the garbage collector running and the operator as its
// ServiceAccount: a Promocion named kubernetes in default leaves the API
// server's own Service as it was, and deleting the Promocion deletes only what
// the operator made; and after kubectl delete promocion --cascade=orphan, a
// new Promocion of the name takes back the orphans that the garbage collector
// left, the same objects.
func TestNoTakeover(t *testing.T) {
	l := newLesson(t)
	l.Identity("no-adopta")
	orphans := l.Namespace("huerfanos")
	t.Cleanup(func() { _, _ = l.TryKubectl("delete", "namespace", orphans, "--wait=false") })
	o := l.Start(framework.Launch{Who: "no-adopta", Kubeconfig: l.ServiceAccountKubeconfig("no-adopta"),
		Args: []string{"--namespace=default", "--namespace=" + orphans}})

	l.Step("1", "a Promocion named kubernetes, in default")
	apiService := func() string {
		return l.Kubectl("get", "service", "kubernetes", "-n", "default", "-o",
			"jsonpath={.metadata.uid} {.metadata.resourceVersion} {.metadata.ownerReferences} {.metadata.labels} {.spec.selector} {.spec.ports}")
	}
	before := apiService()
	l.applyYAML("kubernetes", `apiVersion: tienda.example.com/v1
kind: Promocion
metadata: {name: kubernetes, namespace: default}
spec: {banner: "no es mío", replicas: 0}
`)
	t.Cleanup(func() {
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "promocion", "kubernetes", "-n", "default")
	})
	l.Eventually("the Promocion reports that the Service kubernetes is not its own", func() error {
		out := l.Kubectl("get", "promocion", "kubernetes", "-n", "default", "-o",
			`jsonpath={.status.conditions[?(@.type=="Degraded")].reason}: {.status.conditions[?(@.type=="Degraded")].message}`)
		if !strings.HasPrefix(out, "ChildExists: Service kubernetes already exists and was not made by the operator") {
			return fmt.Errorf("Degraded %q", out)
		}
		return nil
	})
	if describe := l.Kubectl("describe", "promocion", "kubernetes", "-n", "default"); !regexp.MustCompile(`Warning\s+ChildExists`).MatchString(describe) {
		t.Errorf("kubectl describe shows no Warning ChildExists:\n%s", describe)
	}
	var others []string // the children it makes: all but the Service
	for _, child := range framework.Children() {
		if child.Kind != "Service" {
			others = append(others, child.Ref("kubernetes"))
		}
	}
	for _, child := range others {
		if ref := l.Kubectl("get", child, "-n", "default", "-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}"); ref != "Promocion/kubernetes" {
			t.Errorf("%s: owner %q, want the Promocion: the other children are still made", child, ref)
		}
	}
	if now := apiService(); now != before {
		t.Errorf("the API server's Service changed:\nbefore %s\nafter  %s", before, now)
	}
	l.Logf("the Service kubernetes untouched (uid, resourceVersion, owners, labels, selector, ports); the Deployment and ConfigMap made")

	l.Kubectl("delete", "promocion", "kubernetes", "-n", "default")
	l.Eventually("the garbage collector deletes what the operator made", func() error {
		if out := l.Kubectl(append(append([]string{"get"}, others...), "-n", "default", "--ignore-not-found", "-o", "name")...); out != "" {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
	if now := apiService(); now != before {
		t.Errorf("the API server's Service changed after the Promocion's deletion:\nbefore %s\nafter  %s", before, now)
	}
	l.Logf("the Promocion deleted: its Deployment and ConfigMap collected, the Service kubernetes as it was")

	l.Step("2", "kubectl delete promocion --cascade=orphan, then the same name again")
	l.CreatePromociones(orphans, 1, 1)
	l.WaitListo(orphans, 1)
	children := func(jsonpath string) string {
		return l.Kubectl(append(append([]string{"get"}, framework.ChildRefs("promo-0")...), "-n", orphans, "-o", "jsonpath="+jsonpath)...)
	}
	uids := func() string { return children("{.items[*].metadata.uid}") }
	owners := func() string { return children("{range .items[*]}{.metadata.ownerReferences[0].uid} {end}") }
	made := uids()
	l.Kubectl("delete", "promocion", "promo-0", "-n", orphans, "--cascade=orphan")
	if got := strings.TrimSpace(owners()); got != "" || uids() != made {
		t.Fatalf("after --cascade=orphan: children %s with owners %q, want %s with none", uids(), got, made)
	}
	l.Logf("the garbage collector orphaned the children: no owner, the operator's labels")
	l.CreatePromociones(orphans, 1, 1)
	uid := l.Kubectl("get", "promocion", "promo-0", "-n", orphans, "-o", "jsonpath={.metadata.uid}")
	l.Eventually("the new Promocion controls the same children", func() error {
		if got := strings.Fields(owners()); !slices.Equal(got, []string{uid, uid, uid}) {
			return fmt.Errorf("owners %v, want %s of each", got, uid)
		}
		if now := uids(); now != made {
			return fmt.Errorf("children %s, want the orphans %s", now, made)
		}
		return nil
	})
	l.WaitListo(orphans, 1)
	o.Stop(t)
}

// make deploy NAMESPACES=...: the operator from its image, in the cluster,
// watching and writing only in two namespaces, as the API server enforces;
// make undeploy removes it, and the shops keep serving with no operator;
// make deploy again takes them back with zero writes and no pod restarted.
func TestConfinedDeployUndeployDeploy(t *testing.T) {
	if !framework.Env.RealNode {
		t.Fatal("this test needs the real nodes: they run unless CLUSTER_NODE=none")
	}
	l := newLesson(t)
	l.pushOperatorImage()
	l.createPullSecret()
	t.Cleanup(func() { _, _ = l.TryKubectl("delete", "secret", "registry-credentials") })
	// tienda-a's pods run on the real nodes, for real; tienda-b's and fuera's on kwok.
	l.Kubectl("create", "namespace", "tienda-a")
	l.Namespace("tienda-b")
	l.Namespace("fuera")
	watched := []string{"tienda-a", "tienda-b"}
	deploy := []string{"IMG=" + operatorImage, "WEB_IMAGE=" + framework.WebImage, "NAMESPACES=tienda-a,tienda-b"}
	t.Cleanup(func() {
		_, _ = l.make("undeploy")
		_, _ = l.TryKubectl("delete", "namespace", "tienda-a", "tienda-b", "fuera", "--wait=false")
	})

	l.Step("1", "make deploy NAMESPACES=tienda-a,tienda-b, over an earlier install to every namespace")
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "sa.yaml"), "-f", filepath.Join(l.Root, "manifiestos", "rbac.yaml"))
	deployed := time.Now()
	l.mustMake(append([]string{"deploy"}, deploy...)...)
	if out := l.Kubectl("get", "clusterrolebinding", "operador-promociones", "--ignore-not-found", "-o", "name"); out != "" {
		t.Errorf("the grant to every namespace is still there: %s", out)
	}
	l.waitForOperatorPods(2)
	l.applyYAML("escaparate", `apiVersion: tienda.example.com/v1
kind: Promocion
metadata: {name: escaparate, namespace: tienda-a}
spec: {banner: "Rebajas confinadas", replicas: 2}
`)
	l.CreatePromociones("tienda-b", 3, 1)
	l.CreatePromociones("fuera", 1, 1)
	l.WaitListo("tienda-a", 1)
	l.WaitListo("tienda-b", 3)
	if out := l.Kubectl("get", framework.ChildResources(), "-n", "fuera", "-l", "app.kubernetes.io/managed-by=operador-promociones", "-o", "name"); out != "" {
		t.Errorf("the operator made children in fuera, which it does not watch: %s", out)
	}
	if st := l.Kubectl("get", "promocion", "promo-0", "-n", "fuera", "-o", "jsonpath={.status}"); st != "" {
		t.Errorf("the operator wrote the status of a Promocion in fuera: %s", st)
	}
	l.AuditFlushed()
	inShops := func(r framework.Request) bool {
		return r.User == framework.OperatorUser && (strings.Contains(r.URI, "/namespaces/tienda-a/") || strings.Contains(r.URI, "/namespaces/tienda-b/"))
	}
	if made := l.Audit(deployed, inShops); len(made) < 4*4 { // 3 children and a status each, at least
		t.Fatalf("the audit log shows %d writes of the operator making 4 shops: it does not see them", len(made))
	}
	l.Logf("tienda-a and tienda-b Listo; fuera untouched")

	l.Step("2", "the API server confines it: kubectl auth can-i, and a write tried with its own token")
	yes := map[bool]string{true: "yes", false: "no"}
	for _, ns := range []string{"tienda-a", "tienda-b", "fuera", "kube-system", "default"} {
		inside := slices.Contains(watched, ns)
		for _, verb := range []string{"create", "update", "delete"} {
			for _, child := range framework.Children() {
				l.ExpectCanI(framework.OperatorUser, yes[inside], verb, child.Resource, "-n", ns)
			}
		}
		l.ExpectCanI(framework.OperatorUser, yes[inside], "update", "promociones.tienda.example.com", "--subresource=status", "-n", ns)
		l.ExpectCanI(framework.OperatorUser, yes[inside], "list", "promociones.tienda.example.com", "-n", ns)
		l.ExpectCanI(framework.OperatorUser, yes[inside || ns == "default"], "create", "events.events.k8s.io", "-n", ns) // default: who leads
	}
	for _, verb := range []string{"list", "create", "update", "delete"} {
		for _, child := range framework.Children() {
			l.ExpectCanI(framework.OperatorUser, "no", verb, child.Resource, "-A")
		}
	}
	l.ExpectCanI(framework.OperatorUser, "yes", "update", "leases.coordination.k8s.io/operador-promociones", "-n", "default") // its own Lease
	l.ExpectCanI(framework.OperatorUser, "no", "update", "leases.coordination.k8s.io/operador-promociones", "-n", "fuera")
	token := l.ServiceAccountKubeconfig("operador-promociones")
	for _, ns := range []string{"fuera", "kube-system"} {
		out, err := framework.RunCombined(l.KubectlBin, "--kubeconfig", token, "create", "configmap", "intruso", "-n", ns)
		if err == nil || !strings.Contains(out, "forbidden") {
			t.Errorf("the operator's token created a ConfigMap in %s: %v %s", ns, err, out)
		}
	}
	l.Logf("yes in tienda-a and tienda-b, no in fuera, kube-system, default and cluster-wide; its token is refused a write in fuera and kube-system")

	l.Step("3", "make undeploy: the operator goes, the Promociones and their shops stay, serving")
	before := l.shops(watched)
	l.mustMake("undeploy") // it finds the RoleBindings of the confined install itself
	l.Eventually("no operator Pod, ServiceAccount, RBAC or metrics Service left", func() error {
		if out := l.Kubectl("get", "deployments,pods,serviceaccounts,services,roles,rolebindings", "-n", "default", "-l", "app=operador-promociones", "-o", "name"); out != "" {
			return fmt.Errorf("left: %s", out)
		}
		for _, obj := range []string{"serviceaccount/operador-promociones", "clusterrole/operador-promociones", "rolebinding/operador-promociones -n tienda-a",
			"rolebinding/operador-promociones -n tienda-b", "clusterrolebinding/operador-promociones-metrics-auth", "service/operador-promociones-metrics"} {
			if out := l.Kubectl(append(append([]string{"get"}, strings.Fields(obj)...), "--ignore-not-found", "-o", "name")...); out != "" {
				return fmt.Errorf("left: %s", out)
			}
		}
		return nil
	})
	for _, kept := range []string{"crd/promociones.tienda.example.com", "validatingadmissionpolicy/operador-promociones-protect-crd",
		"clusterrole/promocion-editor", "clusterrole/promocion-viewer"} {
		if _, err := l.TryKubectl("get", kept); err != nil {
			t.Errorf("make undeploy deleted %s: %v", kept, err)
		}
	}
	if after := l.shops(watched); after != before {
		t.Errorf("make undeploy changed the shops:\nbefore\n%s\nafter\n%s", before, after)
	}
	l.serves("tienda-a", "escaparate", "Rebajas confinadas")
	l.Logf("with no operator running, the shop of tienda-a serves its page through its Service")

	l.Step("4", "make deploy again: it takes them back, with zero writes and no pod restarted")
	l.AuditFlushed()
	redeployed := time.Now()
	l.mustMake(append([]string{"deploy"}, deploy...)...)
	pods := l.waitForOperatorPods(2)
	leader := l.waitForLeader(pods)
	l.waitReconciled(leader, 4)
	l.AuditFlushed()
	if writes := l.Audit(redeployed, inShops); len(writes) > 0 {
		t.Errorf("the operator wrote %d times to the shops it took back:\n%s", len(writes), framework.First(writes, 20))
	}
	if after := l.shops(watched); after != before {
		t.Errorf("the shops changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	l.Logf("the new leader %s reconciled all 4 Promociones: 0 writes in tienda-a and tienda-b; the Promociones, children and pods as before", leader)
}

// shops is what a change to the shops of namespaces would show: each
// Promocion's and child's resourceVersion (a Deployment's generation, since
// its controller writes its status), and each pod's UID and restarts.
func (l *lesson) shops(namespaces []string) string {
	l.T.Helper()
	var b strings.Builder
	for _, ns := range namespaces {
		b.WriteString(l.Kubectl("get", "promociones", "-n", ns, "-o",
			`jsonpath={range .items[*]}{.kind}/{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}`))
		for _, child := range framework.Children() {
			version := "{.metadata.resourceVersion}"
			if child.Kind == "Deployment" {
				version = "generation {.metadata.generation}" // its controller writes its status
			}
			b.WriteString(l.Kubectl("get", child.Resource, "-n", ns, "-o",
				`jsonpath={range .items[*]}{.kind}/{.metadata.name} `+version+`{"\n"}{end}`))
		}
		b.WriteString(l.Kubectl("get", "pods", "-n", ns, "-o",
			`jsonpath={range .items[*]}{.kind}/{.metadata.name} {.metadata.uid} restarts {.status.containerStatuses[*].restartCount}{"\n"}{end}`))
	}
	return b.String()
}

// serves checks, from node-01, that the Service of promocion in ns serves
// its page with banner, through its ClusterIP.
func (l *lesson) serves(ns, promocion, banner string) {
	l.T.Helper()
	ip := l.Kubectl("get", "service", promocion, "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	l.Eventually(fmt.Sprintf("curl http://%s/ on node-01 serves %q", ip, banner), func() error {
		out, err := framework.ClusterSh("node", "curl", "-sS", "--max-time", "5", "http://"+ip+"/").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "<h1>"+banner+"</h1>") {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})
}

// waitForLeader waits until one of pods holds the operator's Lease, and returns it.
func (l *lesson) waitForLeader(pods []string) string {
	l.T.Helper()
	var leader string
	l.Eventually("one of the operator's Pods leads", func() error {
		holder, _ := l.TryKubectl("get", "lease", "operador-promociones", "-n", "default", "-o", "jsonpath={.spec.holderIdentity}")
		if leader = strings.Split(holder, "_")[0]; !slices.Contains(pods, leader) {
			return fmt.Errorf("the Lease is held by %q", holder)
		}
		return nil
	})
	return leader
}

// waitReconciled waits until the operator's Pod pod has reconciled n
// Promociones since it started, and has nothing queued or in progress: it
// reads the Pod's /metrics through kubectl port-forward, with the token of a
// ServiceAccount bound to the metrics reader's role, as a scraper would.
func (l *lesson) waitReconciled(pod string, n int) {
	l.T.Helper()
	l.Kubectl("create", "serviceaccount", "lector-metricas", "-n", "default")
	l.Kubectl("create", "clusterrolebinding", "lector-metricas", "--clusterrole=operador-promociones-metrics-reader", "--serviceaccount=default:lector-metricas")
	l.T.Cleanup(func() {
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "clusterrolebinding/lector-metricas")
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "serviceaccount/lector-metricas", "-n", "default")
	})
	token := l.Kubectl("create", "token", "lector-metricas", "-n", "default")
	addr, stop := l.portForwardTo("-n", "default", "pod/"+pod, ":8443")
	defer stop()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the certificate is self-signed
	metric := func(body, name, match string) float64 {
		sum := 0.0
		for _, m := range regexp.MustCompile(`(?m)^`+name+`\{([^}]*)\} (\S+)$`).FindAllStringSubmatch(body, -1) {
			if strings.Contains(m[1], match) {
				v, _ := strconv.ParseFloat(m[2], 64)
				sum += v
			}
		}
		return sum
	}
	l.Eventually(fmt.Sprintf("%s has reconciled %d Promociones and has nothing queued", pod, n), func() error {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %.200s", resp.StatusCode, b)
		}
		body := string(b)
		done := metric(body, "controller_runtime_reconcile_total", `controller="promocion",result="success"`)
		queued := metric(body, "workqueue_depth", `name="promocion"`)
		working := metric(body, "controller_runtime_active_workers", `controller="promocion"`)
		if done < float64(n) || queued != 0 || working != 0 {
			return fmt.Errorf("%v reconciled, %v queued, %v reconciling", done, queued, working)
		}
		return nil
	})
}

// Removing the data is a step of its own: the CRD's guard refuses its deletion
// by kubectl, and make uninstall deletes nothing unless told yes, at its
// prompt or with CONFIRM=yes; then it deletes the CRD, every Promocion and
// every shop, the guard and the users' roles. The test puts the API back for
// the tests after it.
func TestUninstall(t *testing.T) {
	l := newLesson(t)
	ns := l.Namespace("desinstalar")
	t.Cleanup(func() { _, _ = l.TryKubectl("delete", "namespace", ns, "--wait=false") })
	l.mustMake("install")
	// The API server enforces a new policy once its informer has it: a server-side
	// dry run goes through admission, so it is refused from then on.
	l.Eventually("the guard is in force", func() error {
		if _, err := l.TryKubectl("delete", "crd", "promociones.tienda.example.com", "--dry-run=server"); err == nil {
			return errors.New("a dry-run deletion of the CRD is still let through")
		}
		return nil
	})
	t.Cleanup(func() {
		if _, err := l.make("install"); err != nil {
			t.Errorf("make install: %v", err)
		}
		l.Eventually("the CRD is back, Established", func() error {
			out, err := l.TryKubectl("get", "crd/promociones.tienda.example.com", "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
			if err == nil && out != "True" {
				err = fmt.Errorf("Established: %q", out)
			}
			return err
		})
	})
	o := l.Start(framework.Launch{Who: "desinstalar", Args: []string{"--namespace=" + ns}})
	l.CreatePromociones(ns, 2, 1)
	l.WaitListo(ns, 2)
	o.Stop(t)
	crdUID := l.Kubectl("get", "crd", "promociones.tienda.example.com", "-o", "jsonpath={.metadata.uid}")
	intact := func(after string) {
		t.Helper()
		if uid, _ := l.TryKubectl("get", "crd", "promociones.tienda.example.com", "-o", "jsonpath={.metadata.uid}"); uid != crdUID {
			t.Fatalf("after %s, the CRD is gone or another (uid %q, was %s)", after, uid, crdUID)
		}
		if n := l.Listo(ns); n != 2 {
			t.Fatalf("after %s, %d Promociones Listo, want 2", after, n)
		}
		if out := l.Kubectl("get", framework.ChildResources(), "-n", ns, "-l", "app.kubernetes.io/managed-by=operador-promociones", "-o", "name"); strings.Count(out, "\n")+1 != 2*len(framework.Children()) {
			t.Fatalf("after %s, the children are not all there:\n%s", after, out)
		}
	}

	for _, args := range [][]string{
		{"delete", "crd", "promociones.tienda.example.com"},
		{"delete", "-f", filepath.Join(l.Root, "manifiestos", "crd.yaml")},
	} {
		_, err := l.TryKubectl(args...)
		if err == nil || !strings.Contains(err.Error(), "deleting this CRD deletes every Promocion in the cluster") {
			t.Errorf("kubectl %s: %v, want the guard's refusal", strings.Join(args, " "), err)
		}
		intact("kubectl " + strings.Join(args, " "))
	}
	l.Logf("kubectl delete crd and kubectl delete -f manifiestos/crd.yaml: refused by the guard, with what to do")

	// The earlier tests' namespaces may still be going, and their Promociones
	// with them: the count make uninstall gives is between those before and after.
	count := func() int { return len(strings.Fields(l.Kubectl("get", "promociones", "-A", "-o", "name"))) }
	before := count()
	out, err := l.make("uninstall")
	all := count()
	listed := 0
	if m := regexp.MustCompile(` (\d+) Promociones, in:`).FindStringSubmatch(out); m != nil {
		listed, _ = strconv.Atoi(m[1])
	}
	if err == nil || listed < all || listed > before || !regexp.MustCompile(`(?m)^\s+`+ns+`\s+2$`).MatchString(out) ||
		!strings.Contains(out, "Nothing deleted") {
		t.Errorf("make uninstall with no terminal: %v, want a refusal listing the Promociones (%d to %d of them):\n%s", err, all, before, out)
	}
	intact("make uninstall with no terminal")
	out, err = l.uninstallAtATerminal("no")
	if err == nil || !strings.Contains(out, "Type yes to delete it all") || !strings.Contains(out, "Nothing deleted.") {
		t.Errorf("make uninstall at a terminal, answered no: %v\n%s", err, out)
	}
	intact("make uninstall answered no")
	l.Logf("make uninstall counts the %d Promociones by namespace and deletes nothing: with no terminal, or answered no", all)

	l.mustMake("uninstall", "CONFIRM=yes")
	for _, gone := range []string{"crd/promociones.tienda.example.com", "validatingadmissionpolicy/operador-promociones-protect-crd",
		"validatingadmissionpolicybinding/operador-promociones-protect-crd", "clusterrole/promocion-editor", "clusterrole/promocion-viewer"} {
		if out := l.Kubectl("get", gone, "--ignore-not-found", "-o", "name"); out != "" {
			t.Errorf("make uninstall CONFIRM=yes left %s", out)
		}
	}
	l.Eventually("the garbage collector deletes the shops", func() error {
		if out := l.Kubectl("get", framework.ChildResources(), "-n", ns, "-l", "app.kubernetes.io/managed-by=operador-promociones", "-o", "name"); out != "" {
			return errors.New(out)
		}
		return nil
	})
	l.Logf("make uninstall CONFIRM=yes: the CRD, the Promociones, their shops, the guard and the roles are gone")
}

// uninstallAtATerminal runs make uninstall under a pseudo-terminal (script(1)),
// answering its question.
func (l *lesson) uninstallAtATerminal(answer string) (string, error) {
	cmd := exec.Command("script", "-qec", fmt.Sprintf("make --no-print-directory uninstall KUBECTL=%s", l.KubectlBin), "/dev/null")
	cmd.Dir = l.Root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+l.Kubeconfig)
	cmd.Stdin = strings.NewReader(answer + "\n")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
