package e2e

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestLesson(t *testing.T) {
	l := newLesson(t)
	l.kubectl("apply", "-f", filepath.Join(l.root, "manifiestos", "ejemplos", "rebajas-verano.yaml"))

	l.step("1", "go run . (the operator, built with go build, against the admin kubeconfig)")
	o := l.start(launch{who: "admin", args: []string{"--web-image=" + webImage}})
	l.eventually("the operator starts its watches", func() error {
		return o.logHas(
			`kind source: \*main.Promocion`, `kind source: \*v1.Deployment`,
			`kind source: \*v1.Service`, `kind source: \*v1.ConfigMap`, `Starting workers`)
	})
	if first := o.firstLine(""); !strings.Contains(first, "operador-promociones arrancando") {
		t.Errorf("the first log line is %q, want operador-promociones arrancando", first)
	}
	l.logf("the first log line says arrancando, and the four EventSources started")

	l.step("2", "the status: kubectl get promociones")
	l.waitForRow("3", "3", "Listo")
	all := l.kubectl("get", "all")
	for _, want := range []string{"deployment.apps/" + name, "service/" + name, "replicaset.apps/" + name} {
		if !strings.Contains(all, want) {
			t.Errorf("kubectl get all lacks %s:\n%s", want, all)
		}
	}
	l.kubectl("get", "configmap", name+"-html")
	l.eventually("3 pods Running", func() error {
		phases := l.kubectl("get", "pods", "-l", "tienda.example.com/promocion="+name, "-o", "jsonpath={.items[*].status.phase}")
		if phases != "Running Running Running" {
			return fmt.Errorf("pod phases %q", phases)
		}
		return nil
	})
	l.logf("%s", l.kubectl("get", "promocion", name, "-o", "jsonpath={.status}"))
	if explain := l.kubectl("explain", "promocion.spec"); !strings.Contains(explain, "banner") || !strings.Contains(explain, "replicas") {
		t.Errorf("kubectl explain promocion.spec:\n%s", explain)
	}
	describe := l.kubectl("describe", "promocion", name)
	if want := "Created ConfigMap rebajas-verano-html, Deployment rebajas-verano and Service rebajas-verano"; !strings.Contains(describe, want) {
		t.Errorf("kubectl describe promocion lacks the event %q:\n%s", want, describe)
	}
	l.logf("kubectl describe promocion %s tells the story:\n%s", name, describe[max(strings.Index(describe, "Events:"), 0):])
	for path, want := range map[string]string{
		o.probesURL + "/healthz":  "ok",
		o.probesURL + "/readyz":   "ok",
		o.metricsURL + "/metrics": `controller_runtime_reconcile_total{controller="promocion",result="success"}`,
	} {
		if body := httpGet(t, path); !strings.Contains(body, want) {
			t.Errorf("GET %s: no %q in:\n%.500s", path, want, body)
		}
	}
	l.logf("/healthz and /readyz answer ok; /metrics counts the reconciles")

	l.step("3", "break it: kubectl delete deployment, kubectl scale")
	took := l.timeRecreation()
	l.logf("FIGURE recovery: %s from the delete request to the new Deployment's watch event", took.Round(time.Millisecond))
	l.kubectl("scale", "deployment", name, "--replicas=1")
	l.eventually("the Deployment goes back to 3 replicas", func() error {
		if r := l.kubectl("get", "deployment", name, "-o", "jsonpath={.spec.replicas}"); r != "3" {
			return fmt.Errorf("spec.replicas %s", r)
		}
		return nil
	})

	l.step("4", "inside the cluster: TestLessonInCluster runs the operator's image as Pods; here the binary goes on as its ServiceAccount")
	o.stop(t)

	l.step("5", "the operator as its ServiceAccount, without RBAC")
	l.kubectl("apply", "-f", filepath.Join(l.root, "manifiestos", "sa.yaml"))
	saConfig := l.serviceAccountKubeconfig("operador-promociones")
	l.kubectl("delete", "service", name) // work for it to do, once it may
	o = l.start(launch{who: "serviceaccount", kubeconfig: saConfig, args: []string{"--web-image=" + webImage}})
	// Refused, then refused again on its next try: alive, and still unable to act.
	refused := `promociones.tienda.example.com is forbidden: User \\"` + regexp.QuoteMeta(sa) + `\\" cannot list`
	l.eventually("the API server refuses the operator", func() error { return o.logHas(refused) })
	first := o.logLines(refused)
	l.eventually("the operator tries again, and is refused again", func() error {
		if o.logLines(refused) == first {
			return errors.New("no new refusal yet")
		}
		return nil
	})
	if _, err := l.tryKubectl("get", "service", name); err == nil {
		t.Errorf("the Service was recreated by an operator with no permissions")
	}
	l.logf("forbidden, and the deleted Service stays deleted")

	l.step("6", "kubectl apply -f manifiestos/rbac.yaml: it reconciles, without a restart")
	l.kubectl("apply", "-f", filepath.Join(l.root, "manifiestos", "rbac.yaml"))
	l.eventually("the Service is back", func() error { _, err := l.tryKubectl("get", "service", name); return err })
	if o.exited() {
		t.Errorf("the operator restarted or died: %v", o.err)
	}
	// rbac.yaml grants exactly the verbs the operator sends; kubectl auth can-i
	// checks each, as the ServiceAccount.
	canI := func(args []string, want string) {
		t.Helper()
		l.expectCanI(sa, want, args...)
	}
	for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
		want := map[bool]string{true: "yes", false: "no"}
		for _, child := range []string{"deployments.apps", "services", "configmaps"} {
			canI([]string{verb, child, "-A"}, want[verb != "patch"]) // delete: to set ownerReferences, never sent
		}
		canI([]string{verb, "promociones.tienda.example.com", "-A"}, want[verb == "get" || verb == "list" || verb == "watch"])
		canI([]string{verb, "promociones.tienda.example.com", "--subresource=status", "-A"}, want[verb == "update"])
		canI([]string{verb, "events.events.k8s.io", "-A"}, want[verb == "create" || verb == "patch"])
		canI([]string{verb, "secrets", "-A"}, "no")
		// Leader election, in the operator's namespace: its own Lease only
		// (create cannot name the object it makes, so it is granted unnamed).
		canI([]string{verb, "leases.coordination.k8s.io/operador-promociones", "-n", "default"}, want[verb == "get" || verb == "update" || verb == "create"])
		canI([]string{verb, "leases.coordination.k8s.io/kube-scheduler", "-n", "default"}, want[verb == "create"])
	}
	canI([]string{"update", "promociones.tienda.example.com", "--subresource=finalizers", "-A"}, "yes") // blockOwnerDeletion
	canI([]string{"create", "leases.coordination.k8s.io", "-n", "default"}, "yes")
	canI([]string{"create", "events", "-A"}, "no") // the core events API: the operator uses events.k8s.io
	l.logf("kubectl auth can-i: yes to each verb the operator needs, no to every other")
	l.kubectl("apply", "-k", filepath.Join(l.root, "manifiestos"), "--dry-run=server") // the Kustomization holds the same files

	l.step("7", "sabotage: delete the Deployment, the Service and the ConfigMap")
	uids := l.uids()
	l.kubectl("delete", "deployment/"+name, "service/"+name, "configmap/"+name+"-html")
	l.eventually("all three are back, as new objects", func() error {
		now := l.uids()
		for kind, old := range uids {
			if now[kind] == "" || now[kind] == old {
				return fmt.Errorf("%s not recreated yet", kind)
			}
		}
		return nil
	})

	l.step("8", "the Promocion is the source of truth: replicas 5")
	watchOut := l.watchPromociones()
	l.kubectl("patch", "promocion", name, "--type=merge", "-p", `{"spec":{"replicas":5}}`)
	if row := l.row(); row[2] != "5" {
		t.Errorf("DESEADAS is %s right after the patch, want 5", row[2])
	}
	l.waitForRow("5", "5", "Listo")
	seen := watchOut()
	l.logf("kubectl get promociones -w printed:\n%s", seen)
	if !regexp.MustCompile(`(?m)^` + name + `\s+\S+\s+5\s+\d+\s+Desplegando\s`).MatchString(seen) {
		t.Errorf("FASE never showed Desplegando with DESEADAS 5")
	}
	l.kubectl("wait", "--for=condition=Ready", "promocion/"+name, "--timeout=60s")
	l.logf("kubectl wait --for=condition=Ready promocion/%s: condition met", name)

	l.step("8b", "a new banner rolls the pods, so they serve the new page at once")
	oldPods := l.kubectl("get", "pods", "-l", "tienda.example.com/promocion="+name, "-o", "jsonpath={.items[*].metadata.name}")
	l.kubectl("patch", "promocion", name, "--type=merge", "-p", `{"spec":{"banner":"Rebajas de invierno"}}`)
	l.eventually("every pod replaced by one of the new template, and Listo", func() error {
		if page := l.kubectl("get", "configmap", name+"-html", "-o", "jsonpath={.data.index\\.html}"); !strings.Contains(page, "<h1>Rebajas de invierno</h1>") {
			return fmt.Errorf("page %q", page)
		}
		pods := strings.Fields(l.kubectl("get", "pods", "-l", "tienda.example.com/promocion="+name,
			"--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}"))
		if len(pods) != 5 {
			return fmt.Errorf("%d running pods", len(pods))
		}
		for _, p := range pods {
			if strings.Contains(oldPods, p) {
				return fmt.Errorf("pod %s is from before the change", p)
			}
		}
		if f := l.kubectl("get", "promocion", name, "-o", "jsonpath={.status.fase}"); f != "Listo" {
			return fmt.Errorf("fase %s", f)
		}
		return nil
	})
	l.kubectl("patch", "promocion", name, "--type=merge", "-p", `{"spec":{"banner":"`+banner+`"}}`)
	l.waitForRow("5", "5", "Listo")

	l.step("9", "kubectl delete promocion: the garbage collector removes everything")
	l.kubectl("delete", "promocion", name)
	l.eventually("the children are gone", func() error {
		for _, args := range [][]string{
			{"deployment", name}, {"service", name}, {"configmap", name + "-html"},
			{"replicasets,pods", "-l", "tienda.example.com/promocion=" + name},
		} {
			out, err := l.tryKubectl(append([]string{"get", "-o", "name"}, args...)...)
			if err == nil && out != "" {
				return fmt.Errorf("still there: %s", out)
			}
		}
		return nil
	})
	l.assertNoDeleteInOperator()
	o.stop(t)
}

// row is rebajas-verano's row of `kubectl get promociones`, after checking the
// lesson's columns.
func (l *lesson) row() []string {
	l.t.Helper()
	lines := strings.Split(l.kubectl("get", "promociones"), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "NAME BANNER DESEADAS LISTAS FASE EDAD" {
		l.t.Fatalf("kubectl get promociones has the columns %q", got)
	}
	for _, line := range lines[1:] {
		if f := strings.Fields(line); len(f) == 6 && f[0] == name {
			return f
		}
	}
	l.t.Fatalf("no complete row for %s in:\n%s", name, strings.Join(lines, "\n"))
	return nil
}

func (l *lesson) waitForRow(deseadas, listas, fase string) {
	l.t.Helper()
	l.eventually(fmt.Sprintf("kubectl get promociones shows %s %s %s", deseadas, listas, fase), func() error {
		lines := strings.Split(l.kubectl("get", "promociones"), "\n")
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			if len(f) == 6 && f[0] == name && f[1] == banner && f[2] == deseadas && f[3] == listas && f[4] == fase {
				l.logf("%s\n    %s", lines[0], line)
				return nil
			}
		}
		return fmt.Errorf("%s", strings.Join(lines, "\n"))
	})
}

// watchPromociones runs `kubectl get promociones -w` until the returned
// function is called, which returns what it printed.
func (l *lesson) watchPromociones() func() string {
	l.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, l.kubectlBin, "--kubeconfig", l.kubeconfig, "get", "promociones", "-w")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.eventually("kubectl get promociones -w prints the current row", func() error {
		if !strings.Contains(out.String(), name) {
			return errors.New("nothing yet")
		}
		return nil
	})
	return func() string {
		cancel()
		_ = cmd.Wait()
		return out.String()
	}
}

// timeRecreation does what `kubectl delete deployment rebajas-verano` does, and
// returns the time from the delete request to the watch event of the
// operator's new Deployment. kubectl's own start-up would swamp the figure, so
// the request is made here.
func (l *lesson) timeRecreation() time.Duration {
	l.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig)
	if err != nil {
		l.t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		l.t.Fatal(err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	took := recreationTime(l.t, c, &appsv1.DeploymentList{}, dep, nil)
	l.logf("deployment.apps/%s deleted and back", name)
	return took
}

func (l *lesson) uids() map[string]string {
	l.t.Helper()
	uids := map[string]string{}
	for _, obj := range []string{"deployment/" + name, "service/" + name, "configmap/" + name + "-html"} {
		uids[obj], _ = l.tryKubectl("get", obj, "-o", "jsonpath={.metadata.uid}")
	}
	return uids
}

// assertNoDeleteInOperator checks the claim of Step 9: the cleanup is the
// garbage collector's, the operator's code has no Delete call.
func (l *lesson) assertNoDeleteInOperator() {
	l.t.Helper()
	// Both builds, so that every file is read: the default one and the one
	// with every other build tag (the bench's variants).
	for _, tags := range []string{"", "unscoped,nofence,oracle"} {
		for _, call := range clientDeletes(l.t, l.root, tags, nil) {
			l.t.Errorf("%s: the cleanup should be the garbage collector's", call)
		}
	}
	// The check finds a planted Delete, through the reconciler's embedded
	// client as through a bare one.
	planted := []byte(`package main
import ("context"; "sigs.k8s.io/controller-runtime/pkg/client")
func planted(ctx context.Context, r *PromocionReconciler, c client.Client, o client.Object) {
	_ = r.Delete(ctx, o)
	_ = c.DeleteAllOf(ctx, o)
}`)
	if found := clientDeletes(l.t, l.root, "", planted); len(found) != 2 {
		l.t.Errorf("the check found %d of the 2 planted Delete calls: %q", len(found), found)
	}
	// rbac.yaml grants no more than create and update, and patch on events (a
	// repeated event becomes a series): what the audit log shows must fit.
	for _, w := range l.operatorWrites(time.Time{}) {
		if w.verb != "create" && w.verb != "update" && (w.verb != "patch" || !strings.Contains(w.uri, "/events")) {
			l.t.Errorf("the operator sent %s %s", w.verb, w.uri)
		}
	}
	l.logf("no Delete in the operator's code, and only creates and updates in the audit log: the garbage collector deleted")
}

// clientDeletes lists the calls of an API client's Delete or DeleteAllOf in the
// package at dir built with tags, type-checked, so that a method of the same
// name elsewhere (an event handler's Delete) is not one. extra, when given,
// is type-checked as one more file of the package: how the check is checked.
func clientDeletes(t *testing.T, dir, tags string, extra []byte) []string {
	t.Helper()
	goList := func(format string, more ...string) []string {
		cmd := exec.Command("go", append([]string{"list", "-tags", tags, "-f", format}, append(more, ".")...)...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	exports := map[string]string{}
	for _, line := range goList(`{{if .Export}}{{.ImportPath}} {{.Export}}{{end}}`, "-export", "-deps") {
		if path, file, ok := strings.Cut(line, " "); ok {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range strings.Fields(goList(`{{join .GoFiles " "}}`)[0]) {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if extra != nil {
		f, err := parser.ParseFile(fset, "extra.go", extra, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	if _, err := conf.Check("main", fset, files, info); err != nil {
		t.Fatalf("type-checking %s (tags %q): %v", dir, tags, err)
	}
	var calls []string
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Delete" && sel.Sel.Name != "DeleteAllOf") {
				return true
			}
			if fn, ok := info.Uses[sel.Sel].(*types.Func); ok && fn.Pkg() != nil {
				if p := fn.Pkg().Path(); strings.HasPrefix(p, "sigs.k8s.io/controller-runtime/pkg/client") || strings.HasPrefix(p, "k8s.io/client-go/") {
					calls = append(calls, fmt.Sprintf("%s calls %s.%s", fset.Position(call.Pos()), p, sel.Sel.Name))
				}
			}
			return true
		})
	}
	return calls
}
