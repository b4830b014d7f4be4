package lesson

import (
	"context"
	"fmt"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// upgradeFrom is the release a team upgrades from: the last commit that
// landed before secure metrics, Promociones' metrics and the new manifests.
// Move it forward when a release is cut.
const upgradeFrom = "9fe8cbf"

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

	// From here on, every Promocion must stay Listo.
	stopWatching := l.watchListo(func() string {
		if got := l.Listo(ns); got != n {
			return fmt.Sprintf("%d of %d Listo", got, n)
		}
		return ""
	})

	l.Kubectl("apply", "-f", crd) // the new CRD, over the stored Promociones
	c := replica("nueva-c", framework.Env.Operator, "version-nueva")
	l.WaitForLog(c, "a new replica waits", waiting)
	b.Stop(t)
	d := replica("nueva-d", framework.Env.Operator, "version-nueva")
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
	// The new leader has gone over every Promocion, and wrote what it had to.
	l.WaitIdle(leader)
	l.AuditFlushed()
	if notListo := stopWatching(); len(notListo) > 0 {
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
	if newWrites := writes("version-nueva", true); len(newWrites) > 0 {
		t.Errorf("the new release wrote to Promociones or children that needed no change:\n%s", framework.First(newWrites, 10))
	}
	after := l.childrenOf(ns)
	for name, was := range before {
		if now := after[name]; !equality.Semantic.DeepEqual(was, now) {
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
	l.Logf("upgraded from %s under %d Promociones: one leader at a time, all Listo throughout, no write from the new release, no pod template changed", upgradeFrom, n)
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
