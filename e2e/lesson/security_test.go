package lesson

// What docs/security.md claims, on a real cluster: a Promocion cannot take over
// what is not the operator's, an install can be confined to namespaces, and
// neither removing the operator nor a slip of the hand loses the users' data.

import (
	"context"
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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// A tenant cannot fill the operator's memory. The operator's label lets an
// object into its cache, whoever put it there, and a Promocion is cached with
// what its author wrote. The operator runs as in deploy.yaml (the Go
// runtime's limit from 256Mi), every namespace watched. 40 ConfigMaps of 900
// KB carrying its labels, in a namespace with no Promocion, raise its RSS by
// under 10 MiB; 200 Promociones with an annotation of 100 KB each raise it by
// under 10 MiB more than 200 plain ones. (Before the cache kept stubs of such
// objects, the first raised it by 52 MiB, the second by 50 MiB against 8:
// issue 49.)
//
// The RSS is read after a garbage collection (its heap profile's gc=1, with
// --pprof), once the runtime has returned the freed pages: what the operator
// keeps, not the garbage of decoding the objects, which the next collection
// frees and which, in the container, the runtime's limit collects before it
// could reach the container's. Each reading without it is logged too.
func TestTenantCannotFillMemory(t *testing.T) {
	l := newLesson(t)
	metrics := filepath.Join(l.Root, "manifiestos", "metrics.yaml")
	l.Kubectl("apply", "-f", metrics)
	l.Kubectl("create", "serviceaccount", "perfilador", "-n", "default")
	for _, role := range []string{"metrics-reader", "pprof-reader"} {
		l.Kubectl("create", "clusterrolebinding", "perfilador-"+role, "--clusterrole=operador-promociones-"+role, "--serviceaccount=default:perfilador")
	}
	labelled, plain, annotated := l.Namespace("relleno"), l.Namespace("planas"), l.Namespace("anotadas")
	t.Cleanup(func() {
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "clusterrolebinding/perfilador-metrics-reader", "clusterrolebinding/perfilador-pprof-reader")
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "serviceaccount/perfilador", "-n", "default")
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "-f", metrics)
		_, _ = l.TryKubectl("delete", "namespace", labelled, plain, annotated, "--wait=false")
	})
	o := l.Start(framework.Launch{Who: "memoria", SecureMetrics: true, Args: []string{"--pprof"},
		Env: []string{"CONTAINER_MEMORY_LIMIT=268435456"}})
	o.MetricsToken = l.Kubectl("create", "token", "perfilador", "-n", "default")
	rss := func(what string) float64 {
		l.WaitIdle(o)
		_, before := o.RSS(t)
		resp, err := o.Get("/debug/pprof/heap?gc=1")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /debug/pprof/heap?gc=1: %s", resp.Status)
		}
		// The least of readings a second apart, once they stop falling.
		least := before
		for calm := 0; calm < 5; {
			time.Sleep(time.Second)
			if _, now := o.RSS(t); now < least-0.1 {
				least, calm = now, 0
			} else {
				calm++
			}
		}
		l.Logf("FIGURE operator RSS %s: %.1f MiB after a garbage collection (%.1f before it)", what, least, before)
		return least
	}
	l.WaitForLog(o, "the operator's workers started", "Starting workers")
	idle := rss("idle")

	l.Step("1", "40 ConfigMaps of 900 KB with the operator's labels, in a namespace with no Promocion")
	big := strings.Repeat("x", 900<<10)
	l.Parallel(40, 4, func(i int) error {
		name := fmt.Sprintf("relleno-%d", i)
		return l.C.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-html", Namespace: labelled,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "operador-promociones", "tienda.example.com/promocion": name}},
			Data: map[string]string{"index.html": big}})
	})
	withConfigMaps := rss("with 40 labelled ConfigMaps of 900 KB")
	if grew := withConfigMaps - idle; grew >= 10 {
		t.Errorf("40 labelled ConfigMaps of 900 KB raised the operator's RSS by %.1f MiB, want under 10", grew)
	}

	l.Step("2", "200 Promociones with an annotation of 100 KB, beside 200 plain ones")
	l.CreatePromociones(plain, 200, 0)
	l.WaitListo(plain, 200)
	withPlain := rss("with 200 plain Promociones")
	note := strings.Repeat("x", 100<<10)
	l.Parallel(200, 16, func(i int) error {
		p := framework.Promocion(annotated, i, 0)
		p.SetAnnotations(map[string]string{"tienda.example.com/nota": note})
		return l.C.Create(context.Background(), p)
	})
	l.WaitListo(annotated, 200)
	withAnnotated := rss("with 200 Promociones of 100 KB annotations more")
	if more := (withAnnotated - withPlain) - (withPlain - withConfigMaps); more >= 10 {
		t.Errorf("200 Promociones with 100 KB annotations raised the RSS by %.1f MiB, 200 plain ones by %.1f: %.1f MiB more, want under 10",
			withAnnotated-withPlain, withPlain-withConfigMaps, more)
	}
	l.Logf("RSS idle %.1f MiB; +%.1f with the labelled ConfigMaps; +%.1f with 200 plain Promociones, +%.1f with 200 annotated ones",
		idle, withConfigMaps-idle, withPlain-withConfigMaps, withAnnotated-withPlain)
}

// make deploy NAMESPACES=...: the operator from its image, in the cluster,
// watching and writing only in two namespaces, as the API server enforces;
// make undeploy removes it, and the shops keep serving with no operator;
// make deploy again takes them back with zero writes and no pod restarted.
func TestConfinedDeployUndeployDeploy(t *testing.T) {
	l := newLessonOnRealNodes(t)
	l.pushOperatorImage()
	// The registry's credentials, in the namespace the operator will run in,
	// made first so that its Pods pull at once.
	system := l.systemNamespace()
	l.createPullSecret(system)
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

	l.Step("1", "make deploy NAMESPACES=tienda-a,tienda-b, over an earlier install to every namespace in default")
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "sa.yaml"), "-f", filepath.Join(l.Root, "manifiestos", "rbac.yaml"))
	deployed := time.Now()
	l.mustMake(append([]string{"deploy"}, deploy...)...)
	if out := l.Kubectl("get", "clusterrolebinding", "operador-promociones", "--ignore-not-found", "-o", "name"); out != "" {
		t.Errorf("the grant to every namespace is still there: %s", out)
	}
	if out := l.Kubectl("get", "serviceaccount,role,rolebinding", "-n", "default", "--field-selector", "metadata.name!=default", "-o", "name"); strings.Contains(out, "operador-promociones") {
		t.Errorf("the earlier install's objects are still in default: %s", out)
	}
	l.waitForOperatorPods(system, 2)
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
		return r.User == framework.TeamOperatorUser && (strings.Contains(r.URI, "/namespaces/tienda-a/") || strings.Contains(r.URI, "/namespaces/tienda-b/"))
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
				l.ExpectCanI(framework.TeamOperatorUser, yes[inside], verb, child.Resource, "-n", ns)
			}
		}
		l.ExpectCanI(framework.TeamOperatorUser, yes[inside], "update", "promociones.tienda.example.com", "--subresource=status", "-n", ns)
		l.ExpectCanI(framework.TeamOperatorUser, yes[inside], "list", "promociones.tienda.example.com", "-n", ns)
		l.ExpectCanI(framework.TeamOperatorUser, yes[inside], "create", "events.events.k8s.io", "-n", ns)
	}
	for _, verb := range []string{"list", "create", "update", "delete"} {
		for _, child := range framework.Children() {
			l.ExpectCanI(framework.TeamOperatorUser, "no", verb, child.Resource, "-A")
		}
	}
	l.ExpectCanI(framework.TeamOperatorUser, "yes", "update", "leases.coordination.k8s.io/operador-promociones", "-n", system) // its own Lease
	l.ExpectCanI(framework.TeamOperatorUser, "yes", "create", "events.events.k8s.io", "-n", system)                            // who leads
	l.ExpectCanI(framework.TeamOperatorUser, "no", "update", "leases.coordination.k8s.io/operador-promociones", "-n", "fuera")
	token := l.ServiceAccountKubeconfigIn(system, "operador-promociones")
	for _, ns := range []string{"fuera", "kube-system"} {
		out, err := framework.RunCombined(l.KubectlBin, "--kubeconfig", token, "create", "configmap", "intruso", "-n", ns)
		if err == nil || !strings.Contains(out, "forbidden") {
			t.Errorf("the operator's token created a ConfigMap in %s: %v %s", ns, err, out)
		}
	}
	l.Logf("yes in tienda-a and tienda-b (and its Lease and events in %s), no in fuera, kube-system, default and cluster-wide; its token is refused a write in fuera and kube-system", system)

	l.Step("3", "make undeploy: the operator goes, the Promociones and their shops stay, serving")
	before := l.shops(watched)
	l.mustMake("undeploy") // it finds the RoleBindings of the confined install itself
	l.Eventually("no operator Pod, ServiceAccount, RBAC, Lease or metrics Service left", func() error {
		for _, ns := range []string{system, "default"} {
			if out := l.Kubectl("get", "deployments,pods,serviceaccounts,services,roles,rolebindings", "-n", ns, "-l", "app=operador-promociones", "-o", "name"); out != "" {
				return fmt.Errorf("left in %s: %s", ns, out)
			}
		}
		for _, obj := range []string{"serviceaccount/operador-promociones -n " + system, "role/operador-promociones-leader-election -n " + system,
			"lease/operador-promociones -n " + system, "clusterrole/operador-promociones", "rolebinding/operador-promociones -n tienda-a",
			"rolebinding/operador-promociones -n tienda-b", "clusterrolebinding/operador-promociones-metrics-auth", "service/operador-promociones-metrics -n " + system} {
			if out := l.Kubectl(append(append([]string{"get"}, strings.Fields(obj)...), "--ignore-not-found", "-o", "name")...); out != "" {
				return fmt.Errorf("left: %s", out)
			}
		}
		return nil
	})
	for _, kept := range []string{"crd/promociones.tienda.example.com", "validatingadmissionpolicy/operador-promociones-protect-crd",
		"clusterrole/promocion-editor", "clusterrole/promocion-viewer", "secret/registry-credentials -n " + system} {
		if _, err := l.TryKubectl(append([]string{"get"}, strings.Fields(kept)...)...); err != nil {
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
	pods := l.waitForOperatorPods(system, 2)
	leader := l.waitForLeader(system, pods)
	l.waitReconciled(system, leader, 4)
	l.AuditFlushed()
	if writes := l.Audit(redeployed, inShops); len(writes) > 0 {
		t.Errorf("the operator wrote %d times to the shops it took back:\n%s", len(writes), framework.First(writes, 20))
	}
	if after := l.shops(watched); after != before {
		t.Errorf("the shops changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	l.Logf("the new leader %s reconciled all 4 Promociones: 0 writes in tienda-a and tienda-b; the Promociones, children and pods as before", leader)
}

// systemNamespace makes the operator's own namespace, as the installer does
// (manifiestos/sistema/namespace.yaml), once one left by an earlier test is
// gone; when the test ends, it goes, with what the test put in it.
func (l *lesson) systemNamespace() string {
	l.T.Helper()
	ns := framework.SystemNamespace
	gone := func() error {
		if out := l.Kubectl("get", "namespace", ns, "--ignore-not-found", "-o", "name"); out != "" {
			return fmt.Errorf("%s is still there", out)
		}
		return nil
	}
	l.Eventually("no namespace "+ns+" left by an earlier test", gone)
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "sistema", "namespace.yaml"))
	l.T.Cleanup(func() {
		_, _ = l.TryKubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false")
		l.Eventually("the namespace "+ns+" gone", gone)
	})
	return ns
}

// kubectlAs runs kubectl as someone.
type kubectlAs func(args ...string) (string, error)

// editorOfDefault makes a user bound to the built-in edit role in default (a
// ServiceAccount, with its token), as a team gives its developers, and
// returns how to run kubectl as them.
func (l *lesson) editorOfDefault() kubectlAs {
	l.T.Helper()
	const editor = "editor-de-default"
	l.Kubectl("create", "serviceaccount", editor, "-n", "default")
	l.Kubectl("create", "rolebinding", editor, "-n", "default", "--clusterrole=edit", "--serviceaccount=default:"+editor)
	l.T.Cleanup(func() {
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "-n", "default", "serviceaccount/"+editor, "rolebinding/"+editor)
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "-n", "kube-system", "deployment/intruso")
	})
	kc := l.ServiceAccountKubeconfig(editor)
	return func(args ...string) (string, error) {
		return framework.RunCombined(l.KubectlBin, append([]string{"--kubeconfig", kc}, args...)...)
	}
}

// editorOfDefaultCannotActAsOperator checks that a user bound to the built-in
// edit role in default cannot write outside default through the operator,
// which runs in system, by any means edit gives them: impersonating its
// ServiceAccount (or the one the lesson's layout had in default), a token
// for it, or its Deployment and Lease. Each write is tried for real; none may
// land. As a control, the same user may impersonate and make tokens for the
// ServiceAccounts of default, which is why the operator must not run there.
func (l *lesson) editorOfDefaultCannotActAsOperator(as kubectlAs, system string) {
	l.T.Helper()
	if out, err := as("create", "token", "default", "-n", "default"); err != nil {
		l.T.Fatalf("the editor of default cannot make a token for default's ServiceAccount, so this check proves nothing: %v %s", err, out)
	}
	if out, err := as("auth", "can-i", "impersonate", "serviceaccounts", "-n", "default"); err != nil || strings.TrimSpace(out) != "yes" {
		l.T.Fatalf("the editor of default may not impersonate default's ServiceAccounts (%q), so this check proves nothing", out)
	}
	intrude := []string{"create", "deployment", "intruso", "-n", "kube-system", "--image=registry.example.com/intruso:1"}
	for what, args := range map[string][]string{
		"impersonating the operator":                       append([]string{"--as=system:serviceaccount:" + system + ":operador-promociones"}, intrude...),
		"impersonating the lesson layout's ServiceAccount": append([]string{"--as=" + framework.OperatorUser}, intrude...),
		"a token for the operator":                         {"create", "token", "operador-promociones", "-n", system},
		"the operator's Deployment":                        {"set", "image", "deployment/operador-promociones", "-n", system, "operador=registry.example.com/intruso:1"},
		"the operator's Lease":                             {"annotate", "lease", "operador-promociones", "-n", system, "intruso=si"},
		"a Pod in the operator's namespace":                {"run", "intruso", "-n", system, "--image=registry.example.com/intruso:1", "--overrides", `{"spec":{"serviceAccountName":"operador-promociones"}}`},
	} {
		if out, err := as(args...); err == nil || !strings.Contains(out, "forbidden") {
			l.T.Errorf("the editor of default, through %s: %v, want forbidden\n%s", what, err, out)
		}
	}
	if _, err := l.TryKubectl("get", "deployment", "intruso", "-n", "kube-system"); err == nil {
		l.T.Error("a Deployment intruso was made in kube-system")
	}
	l.Logf("an editor of default: forbidden to impersonate the operator, make its token, or change its Deployment, Lease or namespace; no Deployment in kube-system")
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
		out, err := suite.ClusterSh("node", "curl", "-sS", "--max-time", "5", "http://"+ip+"/").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "<h1>"+banner+"</h1>") {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})
}

// waitForLeader waits until one of pods holds the operator's Lease in ns, and returns it.
func (l *lesson) waitForLeader(ns string, pods []string) string {
	l.T.Helper()
	var leader string
	l.Eventually("one of the operator's Pods leads", func() error {
		if leader = l.leaseHolder(ns); !slices.Contains(pods, leader) {
			return fmt.Errorf("the Lease is held by %q", leader)
		}
		return nil
	})
	return leader
}

// waitReconciled waits until the operator's Pod pod, in ns, has reconciled n
// Promociones since it started, and has nothing queued or in progress: it
// reads the Pod's /metrics through kubectl port-forward, with the token of a
// ServiceAccount bound to the metrics reader's role, as a scraper would.
func (l *lesson) waitReconciled(ns, pod string, n int) {
	l.T.Helper()
	l.Kubectl("create", "serviceaccount", "lector-metricas", "-n", "default")
	l.Kubectl("create", "clusterrolebinding", "lector-metricas", "--clusterrole=operador-promociones-metrics-reader", "--serviceaccount=default:lector-metricas")
	l.T.Cleanup(func() {
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "clusterrolebinding/lector-metricas")
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "serviceaccount/lector-metricas", "-n", "default")
	})
	token := l.Kubectl("create", "token", "lector-metricas", "-n", "default")
	addr, stop := l.portForwardTo("-n", ns, "pod/"+pod, ":8443")
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
