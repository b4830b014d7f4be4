package lesson

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
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLesson(t *testing.T) {
	l := newLesson(t)
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "ejemplos", "rebajas-verano.yaml"))

	l.Step("1", "go run . (the operator, built with go build, against the admin kubeconfig)")
	o := l.Start(framework.Launch{Who: "admin"}) // no flags, as `go run .`: the default web image, served by the cluster's mirror
	l.Eventually("the operator starts its watches", func() error {
		return o.LogHas(
			`kind source: \*main.Promocion`, `kind source: \*v1.Deployment`,
			`kind source: \*v1.Service`, `kind source: \*v1.ConfigMap`, `Starting workers`)
	})
	if first := o.FirstLine(""); !strings.Contains(first, "operador-promociones arrancando") {
		t.Errorf("the first log line is %q, want operador-promociones arrancando", first)
	}
	l.Logf("the first log line says arrancando, and the four EventSources started")

	l.Step("2", "the status: kubectl get promociones")
	l.waitForRow("3", "3", "Listo")
	all := l.Kubectl("get", "all")
	for _, want := range []string{"deployment.apps/" + framework.LessonName, "service/" + framework.LessonName, "replicaset.apps/" + framework.LessonName} {
		if !strings.Contains(all, want) {
			t.Errorf("kubectl get all lacks %s:\n%s", want, all)
		}
	}
	l.Kubectl("get", "configmap", framework.LessonName+"-html")
	l.Eventually("3 pods Running", func() error {
		phases := l.Kubectl("get", "pods", "-l", "tienda.example.com/promocion="+framework.LessonName, "-o", "jsonpath={.items[*].status.phase}")
		if phases != "Running Running Running" {
			return fmt.Errorf("pod phases %q", phases)
		}
		return nil
	})
	l.Logf("%s", l.Kubectl("get", "promocion", framework.LessonName, "-o", "jsonpath={.status}"))
	if explain := l.Kubectl("explain", "promocion.spec"); !strings.Contains(explain, "banner") || !strings.Contains(explain, "replicas") {
		t.Errorf("kubectl explain promocion.spec:\n%s", explain)
	}
	describe := l.Kubectl("describe", "promocion", framework.LessonName)
	if want := "Created ConfigMap rebajas-verano-html, Deployment rebajas-verano and Service rebajas-verano"; !strings.Contains(describe, want) {
		t.Errorf("kubectl describe promocion lacks the event %q:\n%s", want, describe)
	}
	l.Logf("kubectl describe promocion %s tells the story:\n%s", framework.LessonName, describe[max(strings.Index(describe, "Events:"), 0):])
	for path, want := range map[string]string{
		o.ProbesURL + "/healthz":  "ok",
		o.ProbesURL + "/readyz":   "ok",
		o.MetricsURL + "/metrics": `controller_runtime_reconcile_total{controller="promocion",result="success"}`,
	} {
		if body := framework.HTTPGet(t, path); !strings.Contains(body, want) {
			t.Errorf("GET %s: no %q in:\n%.500s", path, want, body)
		}
	}
	l.Logf("/healthz and /readyz answer ok; /metrics counts the reconciles")

	l.Step("3", "break it: kubectl delete deployment, kubectl scale")
	took := l.timeRecreation()
	l.Logf("FIGURE recovery: %s from the delete request to the new Deployment's watch event", took.Round(time.Millisecond))
	l.Kubectl("scale", "deployment", framework.LessonName, "--replicas=1")
	l.Eventually("the Deployment goes back to 3 replicas", func() error {
		if r := l.Kubectl("get", "deployment", framework.LessonName, "-o", "jsonpath={.spec.replicas}"); r != "3" {
			return fmt.Errorf("spec.replicas %s", r)
		}
		return nil
	})

	l.Step("4", "inside the cluster: TestLessonInCluster runs the operator's image as Pods; here the binary goes on as its ServiceAccount")
	o.Stop(t)

	l.Step("5", "the operator as its ServiceAccount, without RBAC")
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "sa.yaml"))
	saConfig := l.ServiceAccountKubeconfig("operador-promociones")
	l.Kubectl("delete", "service", framework.LessonName) // work for it to do, once it may
	o = l.Start(framework.Launch{Who: "serviceaccount", Kubeconfig: saConfig})
	// Refused, then refused again on its next try: alive, and still unable to act.
	refused := `promociones.tienda.example.com is forbidden: User \\"` + regexp.QuoteMeta(framework.OperatorUser) + `\\" cannot list`
	l.Eventually("the API server refuses the operator", func() error { return o.LogHas(refused) })
	first := o.LogLines(refused)
	l.Eventually("the operator tries again, and is refused again", func() error {
		if o.LogLines(refused) == first {
			return errors.New("no new refusal yet")
		}
		return nil
	})
	if _, err := l.TryKubectl("get", "service", framework.LessonName); err == nil {
		t.Errorf("the Service was recreated by an operator with no permissions")
	}
	l.Logf("forbidden, and the deleted Service stays deleted")

	l.Step("6", "kubectl apply -f manifiestos/rbac.yaml: it reconciles, without a restart")
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "rbac.yaml"))
	l.Eventually("the Service is back", func() error { _, err := l.TryKubectl("get", "service", framework.LessonName); return err })
	if o.Exited() {
		t.Errorf("the operator restarted or died: %v", o.Err)
	}
	// rbac.yaml grants exactly the verbs the operator sends; kubectl auth can-i
	// checks each, as the ServiceAccount.
	canI := func(args []string, want string) {
		t.Helper()
		l.ExpectCanI(framework.OperatorUser, want, args...)
	}
	for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
		want := map[bool]string{true: "yes", false: "no"}
		for _, child := range framework.Children() {
			canI([]string{verb, child.Resource, "-A"}, want[verb != "patch"]) // delete: to set ownerReferences, never sent
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
	l.Logf("kubectl auth can-i: yes to each verb the operator needs, no to every other")
	// The Kustomization holds the same files, for a team's install in the
	// operator's own namespace: a dry run makes no namespace, so it is made first.
	l.systemNamespace()
	l.Kubectl("apply", "-k", filepath.Join(l.Root, "manifiestos"), "--dry-run=server")

	l.Step("7", "sabotage: delete the Deployment, the Service and the ConfigMap")
	uids := l.uids()
	l.Kubectl(append([]string{"delete"}, framework.ChildRefs(framework.LessonName)...)...)
	l.Eventually("every child is back, as a new object", func() error {
		now := l.uids()
		for kind, old := range uids {
			if now[kind] == "" || now[kind] == old {
				return fmt.Errorf("%s not recreated yet", kind)
			}
		}
		return nil
	})

	l.Step("8", "the Promocion is the source of truth: replicas 5")
	watchOut := l.watchPromociones()
	l.Kubectl("patch", "promocion", framework.LessonName, "--type=merge", "-p", `{"spec":{"replicas":5}}`)
	if row := l.row(); row[2] != "5" {
		t.Errorf("DESEADAS is %s right after the patch, want 5", row[2])
	}
	l.waitForRow("5", "5", "Listo")
	seen := watchOut()
	l.Logf("kubectl get promociones -w printed:\n%s", seen)
	if !regexp.MustCompile(`(?m)^` + framework.LessonName + `\s+\S+\s+5\s+\d+\s+Desplegando\s`).MatchString(seen) {
		t.Errorf("FASE never showed Desplegando with DESEADAS 5")
	}
	l.Kubectl("wait", "--for=condition=Ready", "promocion/"+framework.LessonName, "--timeout=60s")
	l.Logf("kubectl wait --for=condition=Ready promocion/%s: condition met", framework.LessonName)

	l.Step("8b", "a new banner rolls the pods, so they serve the new page at once")
	oldPods := l.Kubectl("get", "pods", "-l", "tienda.example.com/promocion="+framework.LessonName, "-o", "jsonpath={.items[*].metadata.name}")
	l.Kubectl("patch", "promocion", framework.LessonName, "--type=merge", "-p", `{"spec":{"banner":"Rebajas de invierno"}}`)
	l.Eventually("every pod replaced by one of the new template, and Listo", func() error {
		if page := l.Kubectl("get", "configmap", framework.LessonName+"-html", "-o", "jsonpath={.data.index\\.html}"); !strings.Contains(page, "<h1>Rebajas de invierno</h1>") {
			return fmt.Errorf("page %q", page)
		}
		pods := strings.Fields(l.Kubectl("get", "pods", "-l", "tienda.example.com/promocion="+framework.LessonName,
			"--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}"))
		if len(pods) != 5 {
			return fmt.Errorf("%d running pods", len(pods))
		}
		for _, p := range pods {
			if strings.Contains(oldPods, p) {
				return fmt.Errorf("pod %s is from before the change", p)
			}
		}
		if f := l.Kubectl("get", "promocion", framework.LessonName, "-o", "jsonpath={.status.fase}"); f != "Listo" {
			return fmt.Errorf("fase %s", f)
		}
		return nil
	})
	l.Kubectl("patch", "promocion", framework.LessonName, "--type=merge", "-p", `{"spec":{"banner":"`+framework.LessonBanner+`"}}`)
	l.waitForRow("5", "5", "Listo")

	l.Step("9", "kubectl delete promocion: the garbage collector removes everything")
	l.Kubectl("delete", "promocion", framework.LessonName)
	l.Eventually("the children are gone", func() error {
		for _, args := range [][]string{
			append([]string{"--ignore-not-found"}, framework.ChildRefs(framework.LessonName)...),
			{"replicasets,pods", "-l", "tienda.example.com/promocion=" + framework.LessonName},
		} {
			out, err := l.TryKubectl(append([]string{"get", "-o", "name"}, args...)...)
			if err == nil && out != "" {
				return fmt.Errorf("still there: %s", out)
			}
		}
		return nil
	})
	gone := `Promocion gone: the garbage collector removes its children.*"name": "` + framework.LessonName + `"`
	l.WaitForLog(o, "the operator's last reconciliation finds the Promocion gone, and says so", gone)
	if n := o.LogLines(gone); n != 1 {
		t.Errorf("%d lines say that %s is gone, want one: the children deleted after it queue nothing", n, framework.LessonName)
	}
	l.Logf("%s", o.FirstLine(gone))
	l.assertNoDeleteInOperator()
	o.Stop(t)
}

// row is rebajas-verano's row of `kubectl get promociones`, after checking the
// lesson's columns.
func (l *lesson) row() []string {
	l.T.Helper()
	lines := strings.Split(l.Kubectl("get", "promociones"), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "NAME BANNER DESEADAS LISTAS FASE EDAD" {
		l.T.Fatalf("kubectl get promociones has the columns %q", got)
	}
	for _, line := range lines[1:] {
		if f := strings.Fields(line); len(f) == 6 && f[0] == framework.LessonName {
			return f
		}
	}
	l.T.Fatalf("no complete row for %s in:\n%s", framework.LessonName, strings.Join(lines, "\n"))
	return nil
}

func (l *lesson) waitForRow(deseadas, listas, fase string) {
	l.T.Helper()
	l.Eventually(fmt.Sprintf("kubectl get promociones shows %s %s %s", deseadas, listas, fase), func() error {
		lines := strings.Split(l.Kubectl("get", "promociones"), "\n")
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			if len(f) == 6 && f[0] == framework.LessonName && f[1] == framework.LessonBanner && f[2] == deseadas && f[3] == listas && f[4] == fase {
				l.Logf("%s\n    %s", lines[0], line)
				return nil
			}
		}
		return fmt.Errorf("%s", strings.Join(lines, "\n"))
	})
}

// watchPromociones runs `kubectl get promociones -w` until the returned
// function is called, which returns what it printed.
func (l *lesson) watchPromociones() func() string {
	l.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, l.KubectlBin, "--kubeconfig", l.Kubeconfig, "get", "promociones", "-w")
	var out framework.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		l.T.Fatal(err)
	}
	l.Eventually("kubectl get promociones -w prints the current row", func() error {
		if !strings.Contains(out.String(), framework.LessonName) {
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
	l.T.Helper()
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: framework.LessonName, Namespace: "default"}}
	took := framework.RecreationTime(l.T, l.C, &appsv1.DeploymentList{}, dep, nil)
	l.Logf("deployment.apps/%s deleted and back", framework.LessonName)
	return took
}

func (l *lesson) uids() map[string]string {
	l.T.Helper()
	uids := map[string]string{}
	for _, obj := range framework.ChildRefs(framework.LessonName) {
		uids[obj], _ = l.TryKubectl("get", obj, "-o", "jsonpath={.metadata.uid}")
	}
	return uids
}

// assertNoDeleteInOperator checks the claim of Step 9: the cleanup is the
// garbage collector's, the operator's code has no Delete call.
func (l *lesson) assertNoDeleteInOperator() {
	l.T.Helper()
	for _, call := range clientDeletes(l.T, l.Root, "", nil) {
		l.T.Errorf("%s: the cleanup should be the garbage collector's", call)
	}
	// The check finds a planted Delete, through the reconciler's embedded
	// client as through a bare one.
	planted := []byte(`package main
import ("context"; "sigs.k8s.io/controller-runtime/pkg/client")
func planted(ctx context.Context, r *PromocionReconciler, c client.Client, o client.Object) {
	_ = r.Delete(ctx, o)
	_ = c.DeleteAllOf(ctx, o)
}`)
	if found := clientDeletes(l.T, l.Root, "", planted); len(found) != 2 {
		l.T.Errorf("the check found %d of the 2 planted Delete calls: %q", len(found), found)
	}
	// rbac.yaml grants no more than create and update, and patch on events (a
	// repeated event becomes a series): what the audit log shows must fit.
	for _, w := range l.OperatorWrites(time.Time{}) {
		if w.Verb != "create" && w.Verb != "update" && (w.Verb != "patch" || !strings.Contains(w.URI, "/events")) {
			l.T.Errorf("the operator sent %s %s", w.Verb, w.URI)
		}
	}
	l.Logf("no Delete in the operator's code, and only creates and updates in the audit log: the garbage collector deleted")
}

// clientDeletes lists the calls of an API client's Delete or DeleteAllOf in the
// package at dir built with tags, type-checked, so that a method of the same
// name elsewhere (an event handler's Delete) is not one. extra, when given,
// is type-checked as one more file of the package: how the check is checked.
func clientDeletes(t testing.TB, dir, tags string, extra []byte) []string {
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
