package chaos

// Spec-transition fuzzing, as Acto (SOSP '23) does it: a random walk of user
// actions, reproducible by its seed, with the oracle at random quiet points,
// and at the end a differential check of history independence: the world
// equals what a fresh operator makes, in a fresh namespace, from the current
// specs alone.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"operador-promociones/e2e/framework"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// walkPromociones is how many Promociones a walk plays with.
const walkPromociones = 4

// action is one step of a walk: what it did, and an error if the world
// answered otherwise than it must (an invalid change accepted, say).
type action func(l *lesson, ns string) (string, error)

// nextAction draws the next step of a walk.
func nextAction(rng *rand.Rand) action {
	name := fmt.Sprintf("promo-%d", rng.IntN(walkPromociones))
	banners := []string{"Rebajas", `<b>oferta</b> & "más" <script>x()</script>`, "🔥 Rebajas 🔥 👩\u200d👩\u200d👧", "تخفيضات الصيف",
		strings.Repeat("ñ", 2048), fmt.Sprintf("Oferta %d", rng.IntN(1000))}
	replicas := []any{nil, 0, 1, 100}
	switch rng.IntN(10) {
	case 0, 1, 2:
		b := banners[rng.IntN(len(banners))]
		return func(l *lesson, ns string) (string, error) {
			return fmt.Sprintf("banner of %s: %.30q", name, b), l.patchSpec(ns, name, map[string]any{"banner": b})
		}
	case 3, 4:
		r := replicas[rng.IntN(len(replicas))]
		return func(l *lesson, ns string) (string, error) {
			return fmt.Sprintf("replicas of %s: %v", name, r), l.patchSpec(ns, name, map[string]any{"replicas": r})
		}
	case 5:
		key := fmt.Sprintf("equipo-%d", rng.IntN(3))
		return func(l *lesson, ns string) (string, error) {
			return "a label on " + name, l.patch(ns, "promociones", name, map[string]any{"metadata": map[string]any{"labels": map[string]any{key: "marketing"}}})
		}
	case 6:
		bad := []struct {
			spec map[string]any
			msg  string
		}{
			{map[string]any{"banner": strings.Repeat("x", 2049)}, "Too long"},
			{map[string]any{"banner": "  "}, "spec.banner must not be blank"},
			{map[string]any{"banner": "dos\nlíneas"}, "spec.banner must be a single line of text"},
			{map[string]any{"replicas": 101}, "should be less than or equal to 100"},
			{map[string]any{"replicas": -1}, "should be greater than or equal to 0"},
		}[rng.IntN(5)]
		return func(l *lesson, ns string) (string, error) {
			what := fmt.Sprintf("invalid change of %s: %.30v", name, bad.spec)
			before, err := l.generation(ns, name)
			if err != nil {
				return what, nil // not there now: nothing to refuse
			}
			err = l.patchSpec(ns, name, bad.spec)
			after, _ := l.generation(ns, name)
			switch {
			case err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.msg):
				return what, fmt.Errorf("want a refusal saying %q, got %w", bad.msg, err)
			case after != before:
				return what, fmt.Errorf("refused, yet the Promocion's spec changed (generation %d to %d)", before, after)
			}
			return what, nil
		}
	case 7:
		children := []struct{ resource, name, patch string }{
			{"deployments", name, `{"spec":{"replicas":7}}`},
			{"configmaps", name + "-html", `{"data":{"index.html":"<h1>pirata</h1>"}}`},
			// Labels or controller removed, not both: a child stripped of both
			// is no longer the operator's (TestLeavesOthersObjectsAlone).
			{"services", name, `{"metadata":{"labels":null}}`},
			{"configmaps", name + "-html", `{"metadata":{"ownerReferences":null}}`},
			{"deployments", name, ""}, // deleted
		}
		c := children[rng.IntN(len(children))]
		return func(l *lesson, ns string) (string, error) {
			if c.patch == "" {
				d := &appsv1.Deployment{}
				d.SetNamespace(ns)
				d.SetName(c.name)
				return "deleted the Deployment " + c.name, client.IgnoreNotFound(l.C.Delete(context.Background(), d))
			}
			var p map[string]any
			_ = json.Unmarshal([]byte(c.patch), &p)
			return fmt.Sprintf("edited %s %s: %s", c.resource, c.name, c.patch), client.IgnoreNotFound(l.patch(ns, c.resource, c.name, p))
		}
	default:
		b := banners[rng.IntN(len(banners))]
		return func(l *lesson, ns string) (string, error) {
			p := framework.Promocion(ns, 0, 1)
			p.SetName(name)
			_ = unstructured.SetNestedField(p.Object, b, "spec", "banner")
			err := client.IgnoreNotFound(l.C.Delete(context.Background(), p.DeepCopy()))
			if err == nil {
				err = l.C.Create(context.Background(), p)
			}
			return "deleted and created again " + name, err
		}
	}
}

// walk takes steps from seed on ns, with the oracle at random quiet points
// (and at the last step); it returns the first step at which the world was
// wrong, or -1.
func walk(l *lesson, ns string, untouched func() []string, seed uint64, steps int) (int, result) {
	rng := rand.New(rand.NewPCG(seed, 1))
	quietPoints := 0
	var r result
	for i := range steps {
		what, err := nextAction(rng)(l, ns)
		if err != nil {
			l.T.Errorf("seed %d, step %d (%s): %v", seed, i, what, err)
			return i, r
		}
		if rng.IntN(25) == 0 || i == steps-1 {
			quietPoints++
			var res result
			was := l.short
			l.short = was || i < steps-1 // the walk's end has the full quiet period
			l.converge(ns, untouched, time.Now(), &res)
			l.short = was
			r.checked, r.converged = r.checked+res.checked, res.converged
			if res.wrong > 0 {
				r.wrong += res.wrong
				return i, r
			}
		}
	}
	r.notes = fmt.Sprintf("%d quiet points", quietPoints)
	return -1, r
}

// fuzz runs a walk of steps from each seed, then checks that a fresh
// operator, in a fresh namespace, makes the same world from the current
// specs. A failing walk is replayed on shorter prefixes, to name the shortest
// that still fails.
func fuzz(l *lesson, seeds []uint64, steps int) result {
	r := result{scenario: "Spec-transition fuzzing", faults: fmt.Sprintf("random walks of %d steps (seeds %v): valid and invalid changes, edits and deletions of children, deletes and recreates", steps, seeds)}
	kubeconfig := l.asOperator("caos-operador")
	for _, seed := range seeds {
		ns, untouched := l.scenarioNamespace(fmt.Sprintf("caos-paseo-%d", seed%100000))
		fresh, _ := l.scenarioNamespace(fmt.Sprintf("caos-paseo-%d-nuevo", seed%100000))
		k := l.kubelet(fmt.Sprintf("paseo-%d", seed%100000), kubeconfig, "--namespace="+ns, "--namespace="+fresh)
		k.waitRunning(time.Time{})
		l.CreatePromociones(ns, walkPromociones, 1)
		failedAt, res := walk(l, ns, untouched, seed, steps)
		r.cases += steps
		r.checked, r.wrong, r.converged = r.checked+res.checked, r.wrong+res.wrong, res.converged
		if failedAt >= 0 {
			k.stop()
			r.notes += fmt.Sprintf("seed %d fails at step %d; %s; ", seed, failedAt, shortestFailing(l, kubeconfig, seed, failedAt))
			continue
		}
		same := "and a fresh namespace made the same world"
		if diff := l.historyIndependent(ns, fresh); diff != "" {
			r.wrong++
			same = "but a fresh namespace made another world"
			l.T.Errorf("seed %d: the world after %d steps is not what a fresh operator makes of the same specs:\n%s", seed, steps, diff)
		}
		k.stop()
		r.notes += fmt.Sprintf("seed %d: %s, %s; ", seed, res.notes, same)
	}
	r.notes = strings.TrimSuffix(r.notes, "; ")
	return r
}

// shortestFailing replays the walk of seed on prefixes shorter than failedAt+1
// steps, halving, in fresh namespaces, and names the shortest that fails.
func shortestFailing(l *lesson, kubeconfig string, seed uint64, failedAt int) string {
	lo, hi := 0, failedAt+1 // hi fails
	for lo+1 < hi {
		mid := (lo + hi) / 2
		ns, untouched := l.scenarioNamespace(fmt.Sprintf("caos-prefijo-%d-%d", seed%100000, mid))
		k := l.kubelet(fmt.Sprintf("prefijo-%d", mid), kubeconfig, "--namespace="+ns)
		k.waitRunning(time.Time{})
		l.CreatePromociones(ns, walkPromociones, 1)
		// The test has failed already; a replay that fails adds its own errors.
		if at, _ := walk(l, ns, untouched, seed, mid); at >= 0 {
			hi = mid
		} else {
			lo = mid
		}
		k.stop()
	}
	return fmt.Sprintf("the shortest failing prefix of the walk of seed %d is %d steps (the run's CHAOS_SEED, printed at its start, replays the walk: -run 'TestChaos/fuzzing')", seed, hi)
}

// historyIndependent copies the specs of ns's Promociones into fresh, waits
// for the operator to make them there, and says how the two worlds differ in
// what the operator owns.
func (l *lesson) historyIndependent(ns, fresh string) string {
	l.T.Helper()
	ctx := context.Background()
	var promos unstructured.UnstructuredList
	promos.SetAPIVersion("tienda.example.com/v1")
	promos.SetKind("PromocionList")
	if err := l.C.List(ctx, &promos, client.InNamespace(ns)); err != nil {
		l.T.Fatal(err)
	}
	for _, p := range promos.Items {
		q := &unstructured.Unstructured{Object: map[string]any{"apiVersion": p.GetAPIVersion(), "kind": p.GetKind(), "spec": p.Object["spec"]}}
		q.SetName(p.GetName())
		q.SetNamespace(fresh)
		if err := l.C.Create(ctx, q); err != nil {
			l.T.Fatal(err)
		}
	}
	var res result
	l.converge(fresh, func() []string { return nil }, time.Now(), &res)
	var diffs []string
	for _, p := range promos.Items {
		for _, pair := range []struct {
			name string
			a, b client.Object
		}{
			{p.GetName() + "-html", &corev1.ConfigMap{}, &corev1.ConfigMap{}},
			{p.GetName(), &appsv1.Deployment{}, &appsv1.Deployment{}},
			{p.GetName(), &corev1.Service{}, &corev1.Service{}},
		} {
			errA := l.C.Get(ctx, types.NamespacedName{Namespace: ns, Name: pair.name}, pair.a)
			errB := l.C.Get(ctx, types.NamespacedName{Namespace: fresh, Name: pair.name}, pair.b)
			if err := errors.Join(errA, errB); err != nil {
				diffs = append(diffs, err.Error())
				continue
			}
			if !equality.Semantic.DeepEqual(owned(pair.a), owned(pair.b)) {
				diffs = append(diffs, fmt.Sprintf("%T %s differs", pair.a, pair.name))
			}
		}
	}
	return strings.Join(diffs, "\n")
}

// owned is what the operator sets in a child.
func owned(obj client.Object) any {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return o.Data
	case *appsv1.Deployment:
		return []any{o.Spec.Replicas, o.Spec.Selector, o.Spec.Template.Labels, o.Spec.Template.Annotations, o.Spec.Template.Spec.Containers[0].Image,
			o.Spec.Template.Spec.Volumes}
	case *corev1.Service:
		return []any{o.Spec.Selector, o.Spec.Ports}
	}
	return nil
}

// patchSpec merge-patches a Promocion's spec (a nil value removes the field).
func (l *lesson) patchSpec(ns, name string, spec map[string]any) error {
	return l.patch(ns, "promociones", name, map[string]any{"spec": spec})
}

// patch merge-patches an object of ns.
func (l *lesson) patch(ns, resource, name string, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	switch resource {
	case "promociones":
		obj.SetAPIVersion("tienda.example.com/v1")
		obj.SetKind("Promocion")
	case "deployments":
		obj.SetAPIVersion("apps/v1")
		obj.SetKind("Deployment")
	case "configmaps":
		obj.SetAPIVersion("v1")
		obj.SetKind("ConfigMap")
	case "services":
		obj.SetAPIVersion("v1")
		obj.SetKind("Service")
	}
	obj.SetNamespace(ns)
	obj.SetName(name)
	return l.C.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, b))
}

// generation is the Promocion's metadata.generation, which only a change of
// its spec moves (the operator's status writes do not).
func (l *lesson) generation(ns, name string) (int64, error) {
	p := framework.Promocion(ns, 0, 0)
	p.SetName(name)
	err := l.C.Get(context.Background(), client.ObjectKeyFromObject(p), p)
	return p.GetGeneration(), err
}
