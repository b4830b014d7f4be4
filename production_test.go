package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operator keeps nothing outside the cluster, so it adds no finalizer, and
// deleting a Promocion completes even with no operator running.
func TestNoFinalizer(t *testing.T) {
	ns, stop := namespaceWithOperator(t)
	p := createPromocion(t, ns, "rebajas-verano", "https://tienda.example.com", 3)
	waitForChildren(t, p)
	if f := getPromocion(t, p).Finalizers; len(f) > 0 {
		t.Errorf("the operator added finalizers %v", f)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &Promocion{}); !apierrors.IsNotFound(err) {
		t.Errorf("with no operator running, the deleted Promocion is still there: %v", err)
	}
}

// events lists the events.k8s.io Events about a Promocion, by reason.
func promocionEvents(t *testing.T, p *Promocion) map[string][]eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := k8sClient.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
		t.Fatal(err)
	}
	byReason := map[string][]eventsv1.Event{}
	for _, e := range list.Items {
		if e.Regarding.UID == p.UID {
			byReason[e.Reason] = append(byReason[e.Reason], e)
		}
	}
	return byReason
}

// Events tell the story: one Created naming the three children, an Updated
// when one is put back, and nothing at all when nothing changed.
func TestEvents(t *testing.T) {
	p, c, stop := runningPromocion(t)
	eventually(t, "one Created event naming the three children", func() error {
		created := promocionEvents(t, p)["Created"]
		if len(created) != 1 {
			return fmt.Errorf("%d Created events, want 1: %+v", len(created), created)
		}
		e := created[0]
		if want := "Created ConfigMap rebajas-verano-html, Deployment rebajas-verano and Service rebajas-verano"; e.Note != want {
			return fmt.Errorf("note %q, want %q", e.Note, want)
		}
		if e.Type != corev1.EventTypeNormal || e.ReportingController != operatorName || e.Related != nil {
			return fmt.Errorf("unexpected event %+v", e)
		}
		return nil
	})
	if err := k8sClient.Patch(ctx, c.dep, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an Updated event for the Deployment", func() error {
		for _, e := range promocionEvents(t, p)["Updated"] {
			if e.Note == "Updated Deployment rebajas-verano" && e.Related != nil && e.Related.Name == "rebajas-verano" && e.Related.Kind == "Deployment" {
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	count := func() (n int) {
		for _, es := range promocionEvents(t, p) {
			n += len(es)
		}
		return n
	}
	before := count()
	reconcileAgain(t, p, 3)
	if after := count(); after != before {
		t.Errorf("reconciling an unchanged Promocion emitted events: %d before, %d after", before, after)
	}
}

// Events reach the API server one at a time, and all of them: a burst does
// not pile up writes in flight beside the reconciles. Each write here is held
// a little on its way, so that, were they let through together, they would
// overlap.
func TestEventsGoOneAtATime(t *testing.T) {
	p := promocionAlone(t, "https://tienda.example.com", 1)
	var inFlight, most atomic.Int32
	counted := onWrites(cfg, func(r *http.Request, next http.RoundTripper) (*http.Response, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(10 * time.Millisecond)
		return next.RoundTrip(r)
	})
	recorder, stop, err := startEvents(ctx, counted, k8sClient.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const n = 20
	for i := range n {
		// Each of its own action: the broadcaster folds Events alike but for their note into a series.
		recorder.Eventf(p, nil, corev1.EventTypeNormal, "Prueba", fmt.Sprintf("Test%d", i), "event %d of a burst", i)
	}
	eventually(t, fmt.Sprintf("%d events", n), func() error {
		if got := len(promocionEvents(t, p)["Prueba"]); got != n {
			return fmt.Errorf("%d events", got)
		}
		return nil
	})
	if m := most.Load(); m != 1 {
		t.Errorf("%d event writes were in flight at once, want 1", m)
	}
}

// The scale subresource: kubectl scale and a HorizontalPodAutoscaler go
// through it to spec.replicas, and read the pods' selector from it.
func TestScaleSubresource(t *testing.T) {
	p, c, _ := runningPromocion(t)
	setDeploymentStatus(t, c.dep, 3)

	var scale autoscalingv1.Scale
	eventually(t, "the scale subresource reports 3 replicas and the pods' selector", func() error {
		if err := k8sClient.SubResource("scale").Get(ctx, p, &scale); err != nil {
			return err
		}
		if scale.Spec.Replicas != 3 || scale.Status.Replicas != 3 || scale.Status.Selector != LabelPromocion+"=rebajas-verano" {
			return fmt.Errorf("scale %+v", scale)
		}
		return nil
	})
	scale.Spec.Replicas = 4
	if err := k8sClient.SubResource("scale").Update(ctx, p, client.WithSubResourceBody(&scale)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment follows the scale to 4", func() error {
		var d appsv1.Deployment
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c.dep), &d); err != nil {
			return err
		}
		if *d.Spec.Replicas != 4 || *getPromocion(t, p).Spec.Replicas != 4 {
			return fmt.Errorf("Deployment replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
}

// The cache holds only what the operator labelled, without managedFields:
// thousands of unrelated ConfigMaps, and unrelated objects of every kind it
// makes, cost it nothing.
func TestCacheHoldsOnlyTheOperatorsChildren(t *testing.T) {
	ns := newNamespace(t)
	for i := range 2000 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ajena-%d", i), Namespace: ns},
			Data: map[string]string{"k": "v"}}
		if err := k8sClient.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// And one unrelated object of every kind the operator makes: a child of a
	// Promocion ajena that is not there, without the operator's labels.
	ajena := &Promocion{ObjectMeta: metav1.ObjectMeta{Name: "ajena", Namespace: ns}}
	for _, k := range childKinds {
		obj := k.New()
		obj.SetName(k.Name(ajena))
		obj.SetNamespace(ns)
		k.Mutate(obj, ajena, DefaultWebImage)
		obj.SetLabels(map[string]string{"app": "ajena"})
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	startOperator(t, ns)
	p := createPromocion(t, ns, "rebajas-verano", "https://tienda.example.com", 3)
	waitForChildren(t, p)

	// A manager with the operator's own cache options, to look inside its cache.
	f := testFlags(ns)
	mgr, err := ctrl.NewManager(cfg, f.managerOptions())
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = mgr.GetCache().Start(mctx) }()
	for _, k := range childKinds {
		eventually(t, "the cache holds the Promocion's "+k.Kind+" and nothing else of its kind", func() error {
			list := k.NewList()
			if err := mgr.GetCache().List(mctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return err
			}
			if len(items) != 1 || items[0].(client.Object).GetName() != k.Name(p) {
				return fmt.Errorf("%d %ss in the cache", len(items), k.Kind)
			}
			if items[0].(client.Object).GetManagedFields() != nil {
				return fmt.Errorf("managedFields are cached")
			}
			return nil
		})
	}
}

// The operator's labels let an object into the cache, whoever put them there:
// a tenant's big ConfigMap labelled so, in a namespace with no Promocion, is
// kept there as a stub, and a Promocion without its big annotation.
func TestCacheKeepsStrangersSmall(t *testing.T) {
	ns := newNamespace(t)
	big := strings.Repeat("x", 900<<10)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "relleno-html", Namespace: ns,
		Labels: map[string]string{LabelManagedBy: operatorName, LabelPromocion: "relleno"}}, Data: map[string]string{pageKey: big}}
	if err := k8sClient.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	p := &Promocion{ObjectMeta: metav1.ObjectMeta{Name: "anotada", Namespace: ns, Annotations: map[string]string{"relleno": big[:100<<10]}},
		Spec: PromocionSpec{Banner: "Oferta", Replicas: new(int32(0))}}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	c := operatorCache(t, ns)
	eventually(t, "the ConfigMap in the cache, as a stub", func() error {
		var got corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
			return err
		}
		if len(got.Data) > 0 || got.UID != cm.UID || got.Labels[LabelPromocion] != "relleno" {
			return fmt.Errorf("cached with %d keys of data, uid %s, labels %v", len(got.Data), got.UID, got.Labels)
		}
		return nil
	})
	eventually(t, "the Promocion in the cache, without its annotation", func() error {
		var got Promocion
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		if len(got.Annotations) > 0 || got.Spec.Banner != "Oferta" {
			return fmt.Errorf("cached with %d annotations, banner %q", len(got.Annotations), got.Spec.Banner)
		}
		return nil
	})
}

// A child whose labels were removed by hand leaves the cache, yet it is found
// and repaired, with no error and no Create that fails forever.
func TestChildWithoutLabelsIsRepaired(t *testing.T) {
	p, c, _ := runningPromocion(t)
	uid := c.dep.UID

	unlabel := []byte(`{"metadata":{"labels":null},"spec":{"replicas":1}}`)
	if err := k8sClient.Patch(ctx, c.dep, client.RawPatch(types.MergePatchType, unlabel)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment has its labels and 3 replicas again", func() error {
		var d appsv1.Deployment
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c.dep), &d); err != nil {
			return err
		}
		if d.Labels["app.kubernetes.io/managed-by"] != operatorName || *d.Spec.Replicas != 3 || d.UID != uid {
			return fmt.Errorf("labels %v, replicas %d", d.Labels, *d.Spec.Replicas)
		}
		return nil
	})
	if warnings := promocionEvents(t, p)["ApplyFailed"]; len(warnings) > 0 {
		t.Errorf("repairing the child failed on the way: %+v", warnings)
	}
}

// With --namespace given twice, the operator serves both namespaces and puts
// back what is deleted in each.
func TestSeveralNamespaces(t *testing.T) {
	a, b := newNamespace(t), newNamespace(t)
	startOperator(t, a, b)
	for _, ns := range []string{a, b} {
		p := createPromocion(t, ns, "rebajas-verano", "https://tienda.example.com", 2)
		c := waitForChildren(t, p)
		old := c.dep.UID
		if err := k8sClient.Delete(ctx, c.dep); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the Deployment in "+ns+" comes back", func() error {
			if err := getChildren(p, c); err != nil {
				return err
			}
			if c.dep.UID == old {
				return fmt.Errorf("still the deleted Deployment")
			}
			return nil
		})
	}
}
