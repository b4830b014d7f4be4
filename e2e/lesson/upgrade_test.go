package lesson

import (
	"context"
	"fmt"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// upgradeFrom is the release a team upgrades from: the last commit that
// landed before secure metrics, Promociones' metrics and the new manifests.
// Move it forward when a release is cut.
const upgradeFrom = "9fe8cbf"

// rollsWebPods is the one change that the upgrade from upgradeFrom makes to
// every Deployment's pod template, which rolls every shop's pods once
// (docs/operating.md, Upgrades): since issue 49 the web pods mount no API
// token. With upgradeFrom moved past it, it goes, and the upgrade must roll
// nothing again.
const rollsWebPods = "automountServiceAccountToken: false"

// A team upgrades the operator under its Promociones as a Deployment's rolling
// update does it: the new CRD first, then a new replica up, an old one down, a
// second new one up, the old leader down. Throughout, one leader at a time
// writes, every Promocion stays Listo, and the new version writes nothing to
// a Promocion or a child that needs no change: no web pod rolls.
func TestUpgrade(t *testing.T) {
	const n = 100
	l := newLesson(t)
	old, oldCRD := l.buildAt(upgradeFrom)
	crd := filepath.Join(l.Root, "manifiestos", "crd.yaml")
	t.Cleanup(func() { _, _ = l.TryKubectl("apply", "-f", crd) })
	l.Kubectl("apply", "-f", oldCRD)
	ns := l.Namespace("mejora")
	for _, sa := range []string{"version-vieja", "version-nueva"} {
		l.Identity(sa)
	}
	args := []string{"--namespace=" + ns, "--leader-elect", "--leader-election-namespace=default",
		"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
	acquired, waiting := `(?i)successfully acquired lease.*default/operador-promociones`, `(?i)attempting to acquire leader lease.*default/operador-promociones`
	replica := func(who, binary, sa string) *framework.Operator {
		return l.Start(framework.Launch{Who: who, Binary: binary, Kubeconfig: l.ServiceAccountKubeconfig(sa), Args: args, PlainMetricsOnly: binary == old})
	}
	a := replica("vieja-a", old, "version-vieja")
	l.WaitForLog(a, "the old release leads", acquired)
	b := replica("vieja-b", old, "version-vieja")
	l.WaitForLog(b, "its second replica waits", waiting)
	l.CreatePromociones(ns, n, 1)
	l.WaitListo(ns, n)
	l.WaitIdle(a)
	before := l.childrenOf(ns)

	// From here on, every Promocion must stay Listo: unless the upgrade rolls
	// the web pods, which then come up anew and Listo after them.
	stopWatching := l.watchListo(func() string {
		if got := l.Listo(ns); got != n {
			return fmt.Sprintf("%d of %d Listo", got, n)
		}
		return ""
	})

	l.Kubectl("apply", "-f", crd) // the new CRD, over the stored Promociones
	c := replica("nueva-c", suite.Operator, "version-nueva")
	l.WaitForLog(c, "a new replica waits", waiting)
	b.Stop(t)
	d := replica("nueva-d", suite.Operator, "version-nueva")
	l.WaitForLog(d, "a second new replica waits", waiting)
	a.Stop(t) // the old leader releases the Lease on its way out
	var leader *framework.Operator
	l.Eventually("a new replica leads", func() error {
		for _, o := range []*framework.Operator{c, d} {
			if o.LogHas(acquired) == nil {
				leader = o
				return nil
			}
		}
		return fmt.Errorf("neither leads yet")
	})
	handover := l.LeaseAcquired()
	// The new leader has gone over every Promocion (its workers start once
	// its cache is filled: idle before that proves nothing), and wrote what
	// it had to; with the pods rolled, every Promocion is Listo again.
	l.WaitMetric(leader, "controller_runtime_reconcile_total", n)
	if rollsWebPods != "" {
		l.Eventually("every Deployment rolled for "+rollsWebPods, func() error {
			var deps appsv1.DeploymentList
			if err := l.C.List(context.Background(), &deps, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, d := range deps.Items {
				if a := d.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || *a {
					return fmt.Errorf("%s not yet", d.Name)
				}
			}
			return nil
		})
	}
	l.WaitListo(ns, n)
	l.WaitIdle(leader)
	l.AuditFlushed()
	if notListo := stopWatching(); len(notListo) > 0 && rollsWebPods == "" {
		t.Errorf("Promociones left Listo during the upgrade:\n%s", strings.Join(framework.First(notListo, 10), "\n"))
	}
	writes := func(sa string, after bool) []framework.Request {
		return l.Audit(time.Time{}, func(w framework.Request) bool {
			return w.User == "system:serviceaccount:default:"+sa && w.At.After(handover) == after && strings.Contains(w.URI, "/namespaces/"+ns+"/")
		})
	}
	if late := writes("version-vieja", true); len(late) > 0 {
		t.Errorf("the old release wrote after the handover, beside the new leader:\n%s", framework.First(late, 10))
	}
	if early := writes("version-nueva", false); len(early) > 0 {
		t.Errorf("the new release wrote before it led:\n%s", framework.First(early, 10))
	}
	newWrites := writes("version-nueva", true)
	if rollsWebPods != "" {
		// Only the Deployments, for the change named, and the statuses and
		// Events of their roll.
		newWrites = slices.DeleteFunc(newWrites, func(w framework.Request) bool {
			return w.Verb == "update" && (strings.Contains(w.URI, "/deployments/") || strings.HasSuffix(w.URI, "/status")) || strings.Contains(w.URI, "/events")
		})
	}
	if len(newWrites) > 0 {
		t.Errorf("the new release wrote to Promociones or children that needed no change:\n%s", framework.First(newWrites, 10))
	}
	after := l.childrenOf(ns)
	for name, was := range before {
		now := after[name]
		if was, ok := was.([]any); ok && rollsWebPods != "" { // a Deployment: generation, resourceVersion, template
			tpl := was[2].(corev1.PodTemplateSpec)
			tpl.Spec.AutomountServiceAccountToken = new(false)
			if got := now.([]any); got[0] != was[0].(int64)+1 || !equality.Semantic.DeepEqual(got[2], tpl) {
				t.Errorf("%s changed in the upgrade by more than %s:\nbefore %+v\nafter  %+v", name, rollsWebPods, was, now)
			}
			continue
		}
		if !equality.Semantic.DeepEqual(was, now) {
			t.Errorf("%s changed in the upgrade:\nbefore %+v\nafter  %+v", name, was, now)
		}
	}

	// Every stored Promocion is valid under the new CRD: a change to each passes
	// its validation (the new rules judge the whole object).
	l.Parallel(n, 16, func(i int) error {
		p := framework.Promocion(ns, i, 1)
		patch := []byte(`{"metadata":{"labels":{"actualizada":"si"}}}`)
		return l.C.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, patch))
	})
	c.Stop(t)
	d.Stop(t)
	if rollsWebPods != "" {
		l.Logf("upgraded from %s under %d Promociones: one leader at a time; the new release's one change, %s, rolled every shop once, and nothing else was written; all Listo after it", upgradeFrom, n, rollsWebPods)
		return
	}
	l.Logf("upgraded from %s under %d Promociones: one leader at a time, all Listo throughout, no write from the new release, no pod template changed", upgradeFrom, n)
}

// A team whose operator runs in default, as every install path put it before
// it had a namespace of its own, runs make deploy. The operator moves to
// operador-promociones-system: the one in default stops, and its Pods are
// gone, before the new one writes anything (the audit log: no two leaders);
// nothing of it is left in default; every Promocion and every shop is as it
// was, serving, untouched by the new operator, which leads and has gone over
// them all; and the way past default's editors is closed (before the move,
// the test's editor of default could act as the operator; after it, not).
func TestMoveFromDefault(t *testing.T) {
	l := newLessonOnRealNodes(t)
	l.pushOperatorImage()
	l.createPullSecret("default")
	system := l.systemNamespace()
	l.createPullSecret(system)
	l.Kubectl("create", "namespace", "mudanza-a") // its pods on the real nodes
	l.Namespace("mudanza-b")                      // its pods on kwok's
	t.Cleanup(func() {
		_, _ = l.make("undeploy")
		_, _ = l.TryKubectl("delete", "secret", "--ignore-not-found", "registry-credentials", "-n", "default")
		_, _ = l.TryKubectl("delete", "namespace", "mudanza-a", "mudanza-b", "--wait=false")
	})
	shops := []string{"mudanza-a", "mudanza-b"}

	l.Step("1", "the operator in default, as every install path put it before: kubectl apply -f manifiestos/")
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos"))
	l.waitForOperatorPods("default", 2)
	l.applyYAML("escaparate", `apiVersion: tienda.example.com/v1
kind: Promocion
metadata: {name: escaparate, namespace: mudanza-a}
spec: {banner: "Rebajas de mudanza", replicas: 2}
`)
	l.CreatePromociones("mudanza-b", 5, 1)
	l.WaitListo("mudanza-a", 1)
	l.WaitListo("mudanza-b", 5)
	as := l.editorOfDefault()
	if out, err := as("--as="+framework.OperatorUser, "create", "deployment", "intruso", "-n", "kube-system",
		"--image=registry.example.com/intruso:1", "--dry-run=server"); err != nil {
		t.Fatalf("before the move, the editor of default could not act as the operator, so the check after it proves nothing: %v\n%s", err, out)
	}
	l.Logf("before the move: the editor of default, as the operator, may create a Deployment in kube-system (server dry run)")

	l.Step("2", "make deploy: the operator moves to "+system)
	before := l.shops(shops)
	l.AuditFlushed()
	moving := time.Now()
	out := l.mustMake("deploy", "IMG="+operatorImage)
	if !strings.Contains(out, "moves to "+system) {
		t.Errorf("make deploy did not say that the operator moves:\n%s", out)
	}
	pods := l.waitForOperatorPods(system, 2)
	leader := l.waitForLeader(system, pods)
	l.waitReconciled(system, leader, 6)
	l.AuditFlushed()
	var lastOld, firstNew framework.Request
	for _, w := range l.Audit(moving, func(r framework.Request) bool { return true }) {
		switch w.User {
		case framework.OperatorUser:
			lastOld = w
		case framework.TeamOperatorUser:
			if firstNew.User == "" {
				firstNew = w
			}
		}
	}
	switch {
	case firstNew.User == "":
		t.Error("the audit log shows no write of the operator in " + system + ": it did not lead")
	case lastOld.User != "" && !lastOld.Done.Before(firstNew.At):
		t.Errorf("two leaders: the operator in default wrote until %s (%s), the new one from %s (%s)", lastOld.Done, lastOld, firstNew.At, firstNew)
	}
	l.Logf("one leader at a time: the last write from default %s, the first from %s %s", lastOld.Done.Format(time.StampMilli), system, firstNew.At.Format(time.StampMilli))
	if left := l.Kubectl("get", "deployments,pods,serviceaccounts,services,roles,rolebindings,poddisruptionbudgets,leases", "-n", "default", "-o", "name"); strings.Contains(left, "operador-promociones") {
		t.Errorf("left in default:\n%s", left)
	}
	if after := l.shops(shops); after != before {
		t.Errorf("the move changed the shops:\nbefore\n%s\nafter\n%s", before, after)
	}
	l.serves("mudanza-a", "escaparate", "Rebajas de mudanza")
	l.Logf("every Promocion and shop as before the move, untouched, serving; nothing of the operator left in default")
	l.editorOfDefaultCannotActAsOperator(as, system)
}

// buildAt builds the operator as it was at commit, and returns the binary and
// that commit's crd.yaml.
func (l *lesson) buildAt(commit string) (binary, crd string) {
	l.T.Helper()
	src := filepath.Join(l.Tmp, "src-"+commit)
	if err := os.MkdirAll(src, 0o755); err != nil {
		l.T.Fatal(err)
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", l.Root, commit, src))
	if out, err := archive.CombinedOutput(); err != nil {
		l.T.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	binary = filepath.Join(l.Tmp, "operador-"+commit)
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		l.T.Fatalf("building %s: %v\n%s", commit, err, out)
	}
	return binary, filepath.Join(src, "manifiestos", "crd.yaml")
}

// childrenOf is, for each Promocion's children in ns, what an upgrade must
// not change: the pod template and generation of the Deployment, and the
// resourceVersion of each child (a write would move it).
func (l *lesson) childrenOf(ns string) map[string]any {
	l.T.Helper()
	ctx := context.Background()
	out := map[string]any{}
	for _, child := range framework.Children() {
		list := child.List()
		if err := l.C.List(ctx, list, client.InNamespace(ns)); err != nil {
			l.T.Fatal(err)
		}
		for _, o := range list.Items {
			out[child.Kind+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	var deps appsv1.DeploymentList
	if err := l.C.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		l.T.Fatal(err)
	}
	for _, d := range deps.Items {
		out["Deployment/"+d.Name] = []any{d.Generation, d.ResourceVersion, d.Spec.Template}
	}
	return out
}
