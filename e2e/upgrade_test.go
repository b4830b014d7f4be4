package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	crd := filepath.Join(l.root, "manifiestos", "crd.yaml")
	t.Cleanup(func() { _, _ = l.tryKubectl("apply", "-f", crd) })
	l.kubectl("apply", "-f", oldCRD)
	ns := l.namespace("mejora")
	for _, sa := range []string{"version-vieja", "version-nueva"} {
		l.identity(sa)
	}
	args := []string{"--namespace=" + ns, "--leader-elect", "--leader-election-namespace=default",
		"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
	acquired, waiting := `(?i)successfully acquired lease.*default/operador-promociones`, `(?i)attempting to acquire leader lease.*default/operador-promociones`
	replica := func(who, binary, sa string) *operator {
		return l.start(launch{who: who, binary: binary, kubeconfig: l.serviceAccountKubeconfig(sa), args: args, plainMetricsOnly: binary == old})
	}
	a := replica("vieja-a", old, "version-vieja")
	l.waitForLog(a, "the old release leads", acquired)
	b := replica("vieja-b", old, "version-vieja")
	l.waitForLog(b, "its second replica waits", waiting)
	l.createPromociones(ns, n, 1)
	l.waitListo(ns, n)
	l.waitIdle(a)
	before := l.childrenOf(ns)

	// From here on, every Promocion must stay Listo.
	var notListo []string
	var mu sync.Mutex
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if got := l.listo(ns); got != n {
				mu.Lock()
				notListo = append(notListo, fmt.Sprintf("%s: %d of %d Listo", time.Now().Format(time.StampMilli), got, n))
				mu.Unlock()
			}
		}
	}()

	l.kubectl("apply", "-f", crd) // the new CRD, over the stored Promociones
	c := replica("nueva-c", env.operator, "version-nueva")
	l.waitForLog(c, "a new replica waits", waiting)
	b.stop(t)
	d := replica("nueva-d", env.operator, "version-nueva")
	l.waitForLog(d, "a second new replica waits", waiting)
	a.stop(t) // the old leader releases the Lease on its way out
	var leader *operator
	l.eventually("a new replica leads", func() error {
		for _, o := range []*operator{c, d} {
			if o.logHas(acquired) == nil {
				leader = o
				return nil
			}
		}
		return fmt.Errorf("neither leads yet")
	})
	handover := coordinationLease{}.acquired(l)
	// The new leader has gone over every Promocion, and wrote what it had to.
	l.waitIdle(leader)
	l.auditFlushed()
	close(done)
	<-watched

	if len(notListo) > 0 {
		t.Errorf("Promociones left Listo during the upgrade:\n%s", strings.Join(first(notListo, 10), "\n"))
	}
	writes := func(sa string, after bool) []request {
		return l.audit(time.Time{}, func(w request) bool {
			return w.user == "system:serviceaccount:default:"+sa && w.at.After(handover) == after && strings.Contains(w.uri, "/namespaces/"+ns+"/")
		})
	}
	if late := writes("version-vieja", true); len(late) > 0 {
		t.Errorf("the old release wrote after the handover, beside the new leader:\n%s", first(late, 10))
	}
	if early := writes("version-nueva", false); len(early) > 0 {
		t.Errorf("the new release wrote before it led:\n%s", first(early, 10))
	}
	if newWrites := writes("version-nueva", true); len(newWrites) > 0 {
		t.Errorf("the new release wrote to Promociones or children that needed no change:\n%s", first(newWrites, 10))
	}
	after := l.childrenOf(ns)
	for name, was := range before {
		if now := after[name]; !equality.Semantic.DeepEqual(was, now) {
			t.Errorf("%s changed in the upgrade:\nbefore %+v\nafter  %+v", name, was, now)
		}
	}

	// Every stored Promocion is valid under the new CRD: a change to each passes
	// its validation (the new rules judge the whole object).
	l.parallel(n, 16, func(i int) error {
		p := promocion(ns, i, 1)
		patch := []byte(`{"metadata":{"labels":{"actualizada":"si"}}}`)
		return l.c.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, patch))
	})
	c.stop(t)
	d.stop(t)
	l.logf("upgraded from %s under %d Promociones: one leader at a time, all Listo throughout, no write from the new release, no pod template changed", upgradeFrom, n)
}

// buildAt builds the operator as it was at commit, and returns the binary and
// that commit's crd.yaml.
func (l *lesson) buildAt(commit string) (binary, crd string) {
	l.t.Helper()
	src := filepath.Join(l.tmp, "src-"+commit)
	if err := os.MkdirAll(src, 0o755); err != nil {
		l.t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", l.root, commit, src))
	if out, err := archive.CombinedOutput(); err != nil {
		l.t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	binary = filepath.Join(l.tmp, "operador-"+commit)
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		l.t.Fatalf("building %s: %v\n%s", commit, err, out)
	}
	return binary, filepath.Join(src, "manifiestos", "crd.yaml")
}

// childrenOf is, for each Promocion's children in ns, what an upgrade must
// not change: the pod template and generation of the Deployment, and the
// resourceVersion of each child (a write would move it).
func (l *lesson) childrenOf(ns string) map[string]any {
	l.t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	var deps appsv1.DeploymentList
	if err := l.c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		l.t.Fatal(err)
	}
	for _, d := range deps.Items {
		out["Deployment/"+d.Name] = []any{d.Generation, d.ResourceVersion, d.Spec.Template}
	}
	for _, kind := range []string{"ConfigMapList", "ServiceList"} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("v1")
		list.SetKind(kind)
		if err := l.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			l.t.Fatal(err)
		}
		for _, o := range list.Items {
			out[kind+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out
}
