package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var ctx = context.Background()

// createPromocion creates the lesson's Promocion in ns, with the given banner and replicas.
func createPromocion(t *testing.T, ns, name, banner string, replicas int32) *Promocion {
	t.Helper()
	p := &Promocion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       PromocionSpec{Banner: banner, Replicas: &replicas},
	}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatalf("creating Promocion: %v", err)
	}
	return p
}

// runningPromocion starts an operator in a namespace of the test's own,
// creates the lesson's rebajas-verano there, and waits for its children.
func runningPromocion(t *testing.T) (*Promocion, *children, func() error) {
	t.Helper()
	ns, stop := namespaceWithOperator(t)
	p := createPromocion(t, ns, "rebajas-verano", "https://tienda.example.com", 3)
	return p, waitForChildren(t, p), stop
}

// children are a Promocion's children as the API server holds them: one of
// each kind in childKinds, and the three that tests look into, by name.
type children struct {
	all []client.Object
	cm  *corev1.ConfigMap
	dep *appsv1.Deployment
	svc *corev1.Service
}

// waitForChildren waits until every child exists and returns them.
func waitForChildren(t *testing.T, p *Promocion) *children {
	t.Helper()
	c := &children{}
	eventually(t, "every child exists", func() error {
		return getChildren(p, c)
	})
	return c
}

func getChildren(p *Promocion, c *children) error {
	c.all = nil
	for _, k := range childKinds {
		obj := k.New()
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: k.Name(p)}, obj); err != nil {
			return err
		}
		c.all = append(c.all, obj)
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			c.cm = o
		case *appsv1.Deployment:
			c.dep = o
		case *corev1.Service:
			c.svc = o
		}
	}
	return nil
}

func (c *children) objects() []client.Object { return c.all }

func getPromocion(t *testing.T, p *Promocion) *Promocion {
	t.Helper()
	var got Promocion
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// setDeploymentStatus plays the Deployment controller, which envtest does not run:
// it reports ready of the Deployment's replicas, all up to date.
func setDeploymentStatus(t *testing.T, key client.Object, ready int32) {
	t.Helper()
	eventually(t, "writing the Deployment's status", func() error {
		var d appsv1.Deployment
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(key), &d); err != nil {
			return err
		}
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n,
			ReadyReplicas: ready, AvailableReplicas: ready, UnavailableReplicas: n - ready}
		return k8sClient.Status().Update(ctx, &d)
	})
}

// 1. The three children, controlled by the Promocion's UID.
func TestCreatesChildren(t *testing.T) {
	ns, _ := namespaceWithOperator(t)
	p := createPromocion(t, ns, "rebajas-verano", `<script>alert("hola")</script> https://tienda.example.com`, 3)
	c := waitForChildren(t, p)

	for _, obj := range c.objects() {
		ref := metav1.GetControllerOf(obj)
		if ref == nil || ref.UID != p.UID || ref.Kind != "Promocion" || ref.Name != p.Name || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("%T %s: controller reference %+v, want the Promocion with UID %s", obj, obj.GetName(), ref, p.UID)
		}
		if obj.GetLabels()[LabelPromocion] != p.Name || obj.GetLabels()["app.kubernetes.io/managed-by"] != "operador-promociones" {
			t.Errorf("%T %s: labels %v do not name the Promocion and the operator", obj, obj.GetName(), obj.GetLabels())
		}
		if mf := obj.GetManagedFields(); len(mf) == 0 || mf[0].Manager != operatorName {
			t.Errorf("%T %s: field managers %+v, want %s whatever the binary is called", obj, obj.GetName(), mf, operatorName)
		}
	}
	if *c.dep.Spec.Replicas != 3 {
		t.Errorf("Deployment replicas %d, want 3", *c.dep.Spec.Replicas)
	}
	if !labels.SelectorFromSet(c.svc.Spec.Selector).Matches(labels.Set(c.dep.Spec.Template.Labels)) || len(c.svc.Spec.Selector) == 0 {
		t.Errorf("Service selector %v does not select the Deployment's pods %v", c.svc.Spec.Selector, c.dep.Spec.Template.Labels)
	}
	if c.svc.Spec.Ports[0].Port != 80 {
		t.Errorf("Service ports %+v, want 80", c.svc.Spec.Ports)
	}
	page := c.cm.Data["index.html"]
	if !strings.Contains(page, "&lt;script&gt;alert(&#34;hola&#34;)&lt;/script&gt; https://tienda.example.com") || strings.Contains(page, "<script>") {
		t.Errorf("the page does not hold the escaped banner:\n%s", page)
	}
	if v := c.dep.Spec.Template.Spec.Volumes; v[0].Name != htmlVolume || v[0].ConfigMap == nil || v[0].ConfigMap.Name != c.cm.Name {
		t.Errorf("the pods do not mount the page's ConfigMap: %+v", v)
	}
}

// 2. A deleted child comes back, as a new object.
func TestDeletedChildrenComeBack(t *testing.T) {
	_, c, _ := runningPromocion(t)

	for _, obj := range c.objects() {
		old := obj.GetUID()
		if err := k8sClient.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("%T %s is recreated", obj, obj.GetName()), func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			if obj.GetUID() == old {
				return fmt.Errorf("still the deleted object")
			}
			return nil
		})
	}
}

// A deleted child's Promocion is taken from the queue before the Promociones
// that were waiting there: the real priority queue of controller-runtime and
// the real owner handler, as SetupWithManager wires them. A child deleted
// after its Promocion, by the garbage collector, queues nothing.
func TestDeletedChildIsRepairedFirst(t *testing.T) {
	ns := newNamespace(t)
	createPromocion(t, ns, "rebajas-verano", "Hasta -50%", 1) // "borrada" is never made: it is gone
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(GroupVersion.WithKind("Promocion"), meta.RESTScopeNamespace)
	h := repairFirst{handler.EnqueueRequestForOwner(newScheme(), mapper, &Promocion{}, handler.OnlyControllerOwner()), k8sClient}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()

	childOf := func(name string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-html"}}
		owner := &Promocion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name)}}
		if err := ctrl.SetControllerReference(owner, cm, newScheme()); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	for i := range 50 { // new Promociones, and their children's creation
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("nueva-%d", i)}})
	}
	h.Create(ctx, event.CreateEvent{Object: childOf("creada")}, q)
	changed := childOf("cambiada")
	changed.ResourceVersion = "2" // a change, not the informer's resync, which goes at low priority
	h.Update(ctx, event.UpdateEvent{ObjectOld: childOf("cambiada"), ObjectNew: changed}, q)
	h.Delete(ctx, event.DeleteEvent{Object: childOf("borrada")}, q)
	h.Delete(ctx, event.DeleteEvent{Object: childOf("rebajas-verano")}, q)

	item, priority, _ := q.GetWithPriority()
	if item.Name != "rebajas-verano" || priority != repairPriority {
		t.Errorf("first out of the queue: %s at priority %d, want rebajas-verano (its ConfigMap deleted) at %d", item.Name, priority, repairPriority)
	}
	q.Done(item)
	for range 52 { // then the others in their order, and the child's creation and change among them
		item, priority, _ = q.GetWithPriority()
		q.Done(item)
		if priority != 0 {
			t.Errorf("%s at priority %d, want 0: only a deletion is a repair", item.Name, priority)
		}
		if item.Name == "borrada" {
			t.Errorf("borrada queued: its child was deleted after it, by the garbage collector, and there is nothing to repair")
		}
	}
	if q.Len() != 0 {
		t.Errorf("%d left in the queue, want 0", q.Len())
	}
}

// 3. Scaling the Deployment by hand is undone.
func TestManualScaleIsUndone(t *testing.T) {
	_, c, _ := runningPromocion(t)

	c.dep.Spec.Replicas = new(int32(1))
	if err := k8sClient.Update(ctx, c.dep); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment is back to 3 replicas", func() error {
		var d appsv1.Deployment
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c.dep), &d); err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
}

// 4. The Promocion is the source of truth: its changes reach the children.
func TestSpecChangesReachChildren(t *testing.T) {
	p, c, _ := runningPromocion(t)
	oldHash := c.dep.Spec.Template.Annotations[AnnotationPageHash]

	patch := []byte(`{"spec":{"replicas":5,"banner":"Rebajas de invierno"}}`)
	if err := k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment has 5 replicas and the page the new banner", func() error {
		if err := getChildren(p, c); err != nil {
			return err
		}
		if *c.dep.Spec.Replicas != 5 {
			return fmt.Errorf("replicas %d", *c.dep.Spec.Replicas)
		}
		if !strings.Contains(c.cm.Data["index.html"], "<h1>Rebajas de invierno</h1>") {
			return fmt.Errorf("page %q", c.cm.Data["index.html"])
		}
		if c.dep.Spec.Template.Annotations[AnnotationPageHash] == oldHash {
			return fmt.Errorf("the pod template still carries the old page's hash, so the pods would not roll")
		}
		return nil
	})
}

// 5. Status follows the Deployment.
func TestStatusFollowsDeployment(t *testing.T) {
	p, c, _ := runningPromocion(t)

	waitForStatus := func(fase string, ready int32, readyCond metav1.ConditionStatus, health kstatus.Status) {
		t.Helper()
		eventually(t, fmt.Sprintf("status %s with %d ready", fase, ready), func() error {
			got := getPromocion(t, p)
			cond := meta.FindStatusCondition(got.Status.Conditions, ConditionReady)
			if got.Status.Fase != fase || got.Status.ReadyReplicas != ready || cond == nil || cond.Status != readyCond ||
				got.Status.ObservedGeneration != got.Generation {
				return fmt.Errorf("status %+v", got.Status)
			}
			if h := kstatusOf(t, p); h != health {
				return fmt.Errorf("kstatus says %s, want %s", h, health)
			}
			return nil
		})
	}
	waitForStatus(FaseDesplegando, 0, metav1.ConditionFalse, kstatus.InProgressStatus)
	setDeploymentStatus(t, c.dep, 2)
	waitForStatus(FaseDesplegando, 2, metav1.ConditionFalse, kstatus.InProgressStatus)
	setDeploymentStatus(t, c.dep, 3)
	waitForStatus(FaseListo, 3, metav1.ConditionTrue, kstatus.CurrentStatus)

	// A new spec: Desplegando until the Deployment has caught up with it.
	if err := k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":5}}`))); err != nil {
		t.Fatal(err)
	}
	waitForStatus(FaseDesplegando, 3, metav1.ConditionFalse, kstatus.InProgressStatus)
	setDeploymentStatus(t, c.dep, 5)
	waitForStatus(FaseListo, 5, metav1.ConditionTrue, kstatus.CurrentStatus)
}

// kstatusOf is the Promocion's health as kstatus, the library behind Flux's
// health checks, computes it from the object in the API server.
func kstatusOf(t *testing.T, p *Promocion) kstatus.Status {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GroupVersion.WithKind("Promocion"))
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), u); err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// 6. Reconciling an unchanged Promocion writes nothing: the resourceVersions of
// the Promocion and of its children stay as they were.
func TestUnchangedPromocionCostsNoWrites(t *testing.T) {
	p, c, stop := runningPromocion(t)
	setDeploymentStatus(t, c.dep, 3)
	eventually(t, "Listo", func() error {
		if f := getPromocion(t, p).Status.Fase; f != FaseListo {
			return fmt.Errorf("fase %q", f)
		}
		return nil
	})
	// Someone else's additions are not the operator's business.
	if err := k8sClient.Patch(ctx, c.dep, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"equipo":"marketing"}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	versions := func() []string {
		if err := getChildren(p, c); err != nil {
			t.Fatal(err)
		}
		v := []string{getPromocion(t, p).ResourceVersion}
		for _, o := range c.objects() {
			v = append(v, o.GetResourceVersion())
		}
		return v
	}
	before := versions()
	reconcileAgain(t, p, 3)
	if after := versions(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("resourceVersions (Promocion, ConfigMap, Deployment, Service) changed from %v to %v", before, after)
	}
	if c.dep.Labels["equipo"] != "marketing" {
		t.Errorf("the operator removed a label it does not own: %v", c.dep.Labels)
	}
}

// The operator's own status write queues no reconcile, nor does a label,
// while a new spec, a deletion, and a status that someone else wrote (a leader
// before this one) do: the predicate on the Promocion's watch reads the
// generation, which the API server moves for the first two, and tells the
// operator's status writes from others' by their resourceVersion. Each step
// is a real write, and the predicate sees the objects before and after it.
func TestWhatQueuesThePromocion(t *testing.T) {
	p := promocionAlone(t, "https://tienda.example.com", 3)
	// A finalizer of the test's own holds the deleted Promocion, so that its
	// deletion is an update to look at; the test removes it at the end.
	if err := k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["tienda.example.com/test"]}}`))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	r := newReconciler(t, k8sClient)
	changed := r.own.promocionChanged()
	for _, step := range []struct {
		what   string
		write  func(p *Promocion) error
		queues bool
	}{
		{"the operator's status write", func(p *Promocion) error {
			return r.updateStatus(ctx, p, computeStatus(p, nil, nil, metav1.Now()))
		}, false},
		{"a status that another wrote", func(p *Promocion) error {
			p.Status.Fase = FaseListo
			return k8sClient.Status().Update(ctx, p)
		}, true},
		{"a label", func(p *Promocion) error {
			return k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"equipo":"marketing"}}}`)))
		}, false},
		{"the banner changed", func(p *Promocion) error {
			return k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"banner":"Rebajas de verano"}}`)))
		}, true},
		{"the Promocion deleted", func(p *Promocion) error { return k8sClient.Delete(ctx, p) }, true},
	} {
		before := getPromocion(t, p)
		if err := step.write(before.DeepCopy()); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		after := getPromocion(t, p)
		if after.ResourceVersion == before.ResourceVersion {
			t.Fatalf("%s: the API server kept resourceVersion %s: no update to look at", step.what, after.ResourceVersion)
		}
		if got := changed.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after}); got != step.queues {
			t.Errorf("%s (generation %d to %d): queued %t, want %t", step.what, before.Generation, after.Generation, got, step.queues)
		}
	}
	if n := len(r.own.pending); n != 0 {
		t.Errorf("%d status writes still remembered after the watch brought them back: %v", n, r.own.pending)
	}
}

// The watch need not bring the operator's status writes in the order of
// their answers: a write may come back before the API server's answer reaches
// the reconcile, or after a later write was answered. Neither is another's
// status, and neither queues a reconcile; a status that another writes right
// after the operator's, before its answer, still gets the Promocion
// reconciled again. Each write is real; the watch's events are handed to the
// predicate at the moment the race would bring them.
func TestOwnStatusWritesInAnyOrder(t *testing.T) {
	p := promocionAlone(t, "Hasta -50%", 1)
	var duringWrite func(before, after *Promocion) // run between a status write and its answer
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			before := getPromocion(t, p)
			if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil {
				return err
			}
			if duringWrite != nil {
				duringWrite(before, getPromocion(t, p))
			}
			return nil
		},
	})
	r := newReconciler(t, c)
	changed := r.own.promocionChanged()
	queued := func(before, after *Promocion) bool {
		return changed.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after})
	}
	writeStatus := func(applyErr error) error {
		cur := getPromocion(t, p)
		return r.updateStatus(ctx, cur, computeStatus(cur, nil, applyErr, metav1.Now()))
	}
	remembered := func(when string) {
		t.Helper()
		if n := len(r.own.pending); n != 0 {
			t.Errorf("%s: %d status writes still remembered", when, n)
		}
	}

	// 1. The write comes back before its answer.
	var early bool
	duringWrite = func(before, after *Promocion) { early = queued(before, after) }
	if err := writeStatus(nil); err != nil {
		t.Fatalf("a status write whose watch event came first: %v", err)
	}
	if early {
		t.Error("the operator's status write, brought back before its answer, queued a reconcile")
	}
	remembered("after a write brought back before its answer")

	// 2. An earlier write comes back after a later one's answer.
	duringWrite = nil
	v0 := getPromocion(t, p)
	if err := writeStatus(errors.New("a failure, to change the status")); err != nil {
		t.Fatal(err)
	}
	v1 := getPromocion(t, p)
	if err := writeStatus(nil); err != nil {
		t.Fatal(err)
	}
	v2 := getPromocion(t, p)
	if v0.ResourceVersion == v1.ResourceVersion || v1.ResourceVersion == v2.ResourceVersion {
		t.Fatalf("resourceVersions %s, %s, %s: two status writes wanted", v0.ResourceVersion, v1.ResourceVersion, v2.ResourceVersion)
	}
	if queued(v0, v1) {
		t.Error("the operator's earlier status write, brought back after a later one's answer, queued a reconcile")
	}
	if queued(v1, v2) {
		t.Error("the operator's later status write queued a reconcile")
	}
	remembered("after both writes came back")

	// 3. Another hand writes a status right after the operator's, before its answer.
	duringWrite = func(before, after *Promocion) {
		other := after.DeepCopy()
		other.Status.Fase = FaseListo
		if err := k8sClient.Status().Update(ctx, other); err != nil {
			t.Fatal(err)
		}
		queued(before, after)
		queued(after, getPromocion(t, p)) // dropped while the write waits: its answer must tell
	}
	err = writeStatus(errors.New("another failure"))
	duringWrite = nil
	if !apierrors.IsConflict(err) {
		t.Fatalf("a status write overtaken by another's, before its answer: got %v, want a conflict, which reconciles again", err)
	}
	remembered("after a write overtaken by another's")
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
		t.Fatal(err)
	}
	if f := getPromocion(t, p).Status.Fase; f != FaseDesplegando {
		t.Errorf("fase %q after reconciling again, want Desplegando: the other hand's Listo not put right", f)
	}
}

// A status that the operator did not write (the last write of a leader
// before it, or a hand edit by someone allowed to) is put right: only the
// operator's own status writes are dropped from the Promocion's watch.
func TestStatusFromAnotherHandIsPutRight(t *testing.T) {
	ns, _ := namespaceWithOperator(t)
	p := createPromocion(t, ns, "rebajas-verano", "Hasta -50%", 1)
	c := waitForChildren(t, p)
	setDeploymentStatus(t, c.dep, 1)
	fase := func(want string) func() error {
		return func() error {
			if f := getPromocion(t, p).Status.Fase; f != want {
				return fmt.Errorf("fase %q, want %q", f, want)
			}
			return nil
		}
	}
	eventually(t, "Listo", fase(FaseListo))
	other := getPromocion(t, p)
	other.Status.Fase = FaseDesplegando
	if err := k8sClient.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Listo again, the other hand's status put right", fase(FaseListo))
}

// A status written while the cache is a moment behind must not be lost. The
// operator wrote Desplegando while a scaled Deployment came back; the
// Deployment then caught up, and the next reconcile computes Listo, equal to
// the status of the older copy that its cache still holds. Skipping the
// write then would leave Desplegando for good, since the operator's own
// write, when the watch brings it, queues nothing. Read-your-writes prevents
// that with one --namespace, but not with several, nor for a new leader. The
// test hands the reconciler the copy that such a cache holds (cachedCopy), and
// then reconciles again if asked to, as the queue does, from a cache that has
// caught up.
func TestStatusNotLostBehindTheCache(t *testing.T) {
	p := promocionAlone(t, "Hasta -50%", 1)
	r := newReconciler(t, k8sClient)
	reconcileWith := func(c client.Client) ctrl.Result {
		t.Helper()
		r.Client = c
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		if err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		return res
	}
	fase := func() string { return getPromocion(t, p).Status.Fase }

	reconcileWith(k8sClient)
	c := waitForChildren(t, p)
	setDeploymentStatus(t, c.dep, 1)
	reconcileWith(k8sClient)
	if f := fase(); f != FaseListo {
		t.Fatalf("fase %q after the Deployment caught up, want Listo", f)
	}
	stale := getPromocion(t, p) // what the cache holds until it sees the next write

	// Someone scales the Deployment, and the Deployment controller follows;
	// the operator scales it back, and writes Desplegando.
	if err := k8sClient.Patch(ctx, c.dep, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":7}}`))); err != nil {
		t.Fatal(err)
	}
	setDeploymentStatus(t, c.dep, 1)
	reconcileWith(k8sClient)
	if f := fase(); f != FaseDesplegando {
		t.Fatalf("fase %q after a scale to 7, want Desplegando", f)
	}

	setDeploymentStatus(t, c.dep, 1) // back at one replica, and ready
	res := reconcileWith(cachedCopy{k8sClient, stale})
	if res.IsZero() {
		t.Fatalf("a reconcile from a cache behind the operator's own status write asked for nothing more; fase %q", fase())
	}
	reconcileWith(k8sClient)
	if f := fase(); f != FaseListo {
		t.Errorf("fase %q once the cache caught up, want Listo", f)
	}
}

// 7. The API server rejects invalid Promociones with a message that says what
// to change, and accepts the edge cases.
func TestValidation(t *testing.T) {
	ns := newNamespace(t)
	create := func(name string, spec map[string]any) error {
		obj := map[string]any{
			"apiVersion": "tienda.example.com/v1", "kind": "Promocion",
			"metadata": map[string]any{"name": name, "namespace": ns},
		}
		if spec != nil {
			obj["spec"] = spec
		}
		return k8sClient.Create(ctx, &unstructured.Unstructured{Object: obj})
	}
	b := func(banner string) map[string]any { return map[string]any{"banner": banner} }
	name63 := "a" + strings.Repeat("b", 61) + "c"

	for _, tc := range []struct {
		name, objName string
		spec          map[string]any
		want          string
	}{
		{"spec missing", "p", nil, `spec: Required value`},
		{"banner missing", "p", map[string]any{"replicas": 1}, `spec.banner: Required value`},
		{"banner empty", "p", b(""), `spec.banner: Invalid value: "": spec.banner in body should be at least 1 chars long`},
		{"banner blank", "p", b("   "), `spec.banner must not be blank; write the text the page should show`},
		{"banner with a newline", "p", b("rebajas\nde verano"), `spec.banner must be a single line of text: remove control characters`},
		{"banner with an escape character", "p", b("\x1b[31mrojo"), `spec.banner must be a single line of text`},
		{"banner with a NUL", "p", b("a\x00b"), `spec.banner must be a single line of text`},
		{"banner too long", "p", b(strings.Repeat("a", MaxBannerLength+1)), `spec.banner: Too long: may not be more than 2048`},
		{"banner a number", "p", map[string]any{"banner": 3}, `spec.banner: Invalid value: "integer": spec.banner in body must be of type string`},
		{"replicas negative", "p", map[string]any{"banner": "b", "replicas": -1}, `spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0`},
		{"replicas over the maximum", "p", map[string]any{"banner": "b", "replicas": 101}, `spec.replicas: Invalid value: 101: spec.replicas in body should be less than or equal to 100`},
		{"replicas a string", "p", map[string]any{"banner": "b", "replicas": "tres"}, `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer`},
		{"replicas a fraction", "p", map[string]any{"banner": "b", "replicas": 1.5}, `spec.replicas: Invalid value: "float64": spec.replicas in body must be of type int32`},
		{"name starting with a digit", "1-rebajas", b("b"), `metadata.name must start with a lowercase letter`},
		{"name with a dot", "rebajas.verano", b("b"), `metadata.name must start with a lowercase letter, end with a letter or digit, and hold only lowercase letters, digits and '-'`},
		{"name of 64 characters", name63 + "d", b("b"), `metadata.name must be at most 63 characters`},
	} {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			err := create(tc.objName, tc.spec)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant an Invalid error containing %q", err, tc.want)
			}
			t.Logf("%v", err)
		})
	}

	for i, tc := range []struct {
		name, objName string
		spec          map[string]any
	}{
		{"name of 63 characters", name63, b("b")},
		{"name of one letter", "a", b("b")},
		{"name with digits and dashes", "a1-b2-c3", b("b")},
		{"replicas 0", "p", map[string]any{"banner": "b", "replicas": 0}},
		{"replicas at the maximum", "p", map[string]any{"banner": "b", "replicas": 100}},
		{"replicas not said", "p", b("b")},
		{"banner of one character", "p", b("¡")},
		{"banner at the maximum", "p", b(strings.Repeat("a", MaxBannerLength))},
		{"banner of 2048 emoji", "p", b(strings.Repeat("🎉", MaxBannerLength))},
		{"Unicode banner", "p", b("¡Rebajas de verano! 🎉 ñandú")},
		{"right-to-left banner", "p", b("تخفيضات الصيف")},
		{"HTML banner", "p", b(`<script>alert('x')</script>`)},
		{"quotes and ampersand", "p", b(`"Tom" & 'Jerry'`)},
		{"spaces around the text", "p", b("  hola  ")},
	} {
		t.Run("valid/"+tc.name, func(t *testing.T) {
			name := tc.objName
			if name == "p" {
				name = fmt.Sprintf("valida-%d", i)
			}
			if err := create(name, tc.spec); err != nil {
				t.Fatalf("rejected: %v", err)
			}
			var got Promocion
			if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.Banner != tc.spec["banner"] {
				t.Errorf("banner stored as %q", got.Spec.Banner)
			}
			if _, said := tc.spec["replicas"]; !said && (got.Spec.Replicas == nil || *got.Spec.Replicas != DefaultReplicas) {
				t.Errorf("replicas not said, and stored as %v: want the schema's default, %d", got.Spec.Replicas, DefaultReplicas)
			}
		})
	}
}

// A Promocion's author says a banner and a number of replicas, and nothing
// else: fields the schema does not know, such as an image, a command or a
// pod template, are dropped by the API server before the Promocion is
// stored, and the pods run the operator's web image as the operator sets them up.
func TestAuthorChoosesOnlyBannerAndReplicas(t *testing.T) {
	ns, _ := namespaceWithOperator(t)
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tienda.example.com/v1", "kind": "Promocion",
		"metadata": map[string]any{"name": "lista", "namespace": ns},
		"spec": map[string]any{"banner": "b", "replicas": int64(1), "image": "registry.example.com/minero:1",
			"command": []any{"sh", "-c", "minar"}, "template": map[string]any{"spec": map[string]any{"hostNetwork": true}}},
	}}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(p.GroupVersionKind())
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored); err != nil {
		t.Fatal(err)
	}
	if spec, _, _ := unstructured.NestedMap(stored.Object, "spec"); len(spec) != 2 {
		t.Errorf("the stored spec is %v, want the banner and the replicas alone", spec)
	}
	var d appsv1.Deployment
	eventually(t, "the Deployment is made", func() error {
		return k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &d)
	})
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 || pod.Containers[0].Image != DefaultWebImage || len(pod.Containers[0].Command) > 0 || pod.HostNetwork {
		t.Errorf("the pods are not the operator's web server: %+v", pod)
	}
}

// reconcileAgain calls Reconcile n times on p, as resyncs would.
func reconcileAgain(t *testing.T, p *Promocion, n int) {
	t.Helper()
	r := newReconciler(t, k8sClient)
	for range n {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
			t.Fatal(err)
		}
	}
}

// createForeignChild creates obj in ns under the control of someone else: a
// ConfigMap of theirs, which it returns.
func createForeignChild(t *testing.T, ns string, obj client.Object) *corev1.ConfigMap {
	t.Helper()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "otro-dueno", Namespace: ns}}
	if err := k8sClient.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	obj.SetNamespace(ns)
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: new(true)}})
	if err := k8sClient.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	return owner
}

// teamObjects are a team's Service, Deployment and ConfigMap that happen to
// bear the names of a Promocion pagos's children, none of them with an owner.
func teamObjects() (*corev1.Service, *appsv1.Deployment, *corev1.ConfigMap) {
	app := map[string]string{"app": "pagos"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "pagos", Labels: app},
		Spec: corev1.ServiceSpec{Selector: app, Ports: []corev1.ServicePort{{Name: "https", Port: 8443}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pagos", Labels: app}, Spec: appsv1.DeploymentSpec{
		Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: app},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: app}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pagos", Image: "registry.example.com/equipo/pagos:1.4"}}}}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pagos-html"}, Data: map[string]string{"config.yaml": "moneda: EUR"}}
	return svc, dep, cm
}

// 8. An object with a child's name that the operator did not make for this
// Promocion (a team's, with no owner; or controlled by another) is left
// exactly as it is, resourceVersion included. The Promocion says so in its
// conditions, in a Warning event and in the apply-error metric, and its
// other children are still made.
func TestLeavesOthersObjectsAlone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		theirs  func(t *testing.T, ns string) []client.Object // made before the Promocion
		reason  string
		message string // how the Ready and Degraded messages start
	}{
		{"a team's Service, Deployment and ConfigMap, none with an owner", func(t *testing.T, ns string) []client.Object {
			svc, dep, cm := teamObjects()
			return createAll(t, ns, cm, dep, svc)
		}, "ChildExists", "ConfigMap pagos-html, Deployment pagos and Service pagos already exist and were not made by the operator for this Promocion"},
		{"a team's Service alone", func(t *testing.T, ns string) []client.Object {
			svc, _, _ := teamObjects()
			return createAll(t, ns, svc)
		}, "ChildExists", "Service pagos already exists and was not made by the operator for this Promocion"},
		{"a ConfigMap controlled by another", func(t *testing.T, ns string) []client.Object {
			_, _, cm := teamObjects()
			createForeignChild(t, ns, cm)
			return []client.Object{cm}
		}, "ChildOwnedByOther", "pagos-html already exists and is controlled by ConfigMap otro-dueno"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			theirs := tc.theirs(t, ns)
			inTheWay := map[string]bool{}
			errorsBefore := map[string]float64{}
			for _, obj := range theirs {
				kind := kindName(t, obj)
				inTheWay[kind] = true
				errorsBefore[kind] = testutil.ToFloat64(applyErrors.WithLabelValues(kind, tc.reason))
			}
			startOperator(t, ns)
			p := createPromocion(t, ns, "pagos", "Pagos", 3)

			eventually(t, "the Promocion reports "+tc.reason, func() error {
				got := getPromocion(t, p)
				for _, typ := range []string{ConditionReady, ConditionDegraded} {
					c := meta.FindStatusCondition(got.Status.Conditions, typ)
					want := map[string]metav1.ConditionStatus{ConditionReady: metav1.ConditionFalse, ConditionDegraded: metav1.ConditionTrue}[typ]
					if c == nil || c.Status != want || c.Reason != tc.reason || !strings.HasPrefix(c.Message, tc.message) {
						return fmt.Errorf("%s: %+v", typ, c)
					}
				}
				if h := kstatusOf(t, p); h != kstatus.FailedStatus {
					return fmt.Errorf("kstatus says %s, want Failed", h)
				}
				warned := map[string]bool{}
				for _, e := range promocionEvents(t, p)[tc.reason] {
					if e.Type == corev1.EventTypeWarning && e.Related != nil {
						warned[e.Related.Kind] = true
					}
				}
				for kind := range inTheWay {
					if !warned[kind] {
						return fmt.Errorf("no Warning event %s about the %s", tc.reason, kind)
					}
					if n := testutil.ToFloat64(applyErrors.WithLabelValues(kind, tc.reason)); n <= errorsBefore[kind] {
						return fmt.Errorf("promociones_apply_errors_total{kind=%s,reason=%s} %v, not counted", kind, tc.reason, n)
					}
				}
				return nil
			})
			for _, obj := range theirs {
				now := obj.DeepCopyObject().(client.Object)
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), now); err != nil {
					t.Fatal(err)
				}
				if !equality.Semantic.DeepEqual(now, obj) {
					t.Errorf("%s %s changed (resourceVersion %s to %s):\nbefore %+v\nafter  %+v", kindName(t, obj), obj.GetName(),
						obj.GetResourceVersion(), now.GetResourceVersion(), obj, now)
				}
			}
			// The children not in the way are made, and are the Promocion's.
			for _, child := range []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pagos-html"}},
				&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pagos"}}, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "pagos"}}} {
				if inTheWay[kindName(t, child)] {
					continue
				}
				child.SetNamespace(ns)
				eventually(t, fmt.Sprintf("the %s is made", kindName(t, child)), func() error {
					if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(child), child); err != nil {
						return err
					}
					if ref := metav1.GetControllerOf(child); ref == nil || ref.UID != p.UID {
						return fmt.Errorf("controller %+v", ref)
					}
					return nil
				})
			}
		})
	}
}

// createAll creates objs in ns, as they are, and returns them as the API server stored them.
func createAll(t *testing.T, ns string, objs ...client.Object) []client.Object {
	t.Helper()
	for _, obj := range objs {
		obj.SetNamespace(ns)
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

func kindName(t *testing.T, obj client.Object) string {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, k8sClient.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	return gvk.Kind
}

// 9. The operator takes back the children it made for a Promocion of the
// same name, when a new Promocion of that name comes: the same objects
// (UIDs), now controlled by the new Promocion and holding its spec.
func TestTakesBackItsOwnOrphans(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stripOwners bool
	}{
		// kubectl delete promocion --cascade=orphan: the garbage collector
		// removes the children's ownerReferences, and the test does it here
		// since envtest runs none.
		{"orphaned by kubectl delete --cascade=orphan", true},
		// Deleted and made again before the garbage collector came: the
		// children are still controlled by the old UID (envtest has no
		// garbage collector, so it never comes).
		{"deleted and made again before the garbage collector", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, stop := namespaceWithOperator(t)
			old := createPromocion(t, ns, "rebajas-verano", "Antes", 3)
			c := waitForChildren(t, old)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			uids := map[string]types.UID{}
			for _, obj := range c.objects() {
				uids[kindName(t, obj)] = obj.GetUID()
				// A field the operator does not own, which the take-back must
				// keep: the cache holds only a stub of an orphan.
				patch := `{"metadata":{"annotations":{"equipo":"marketing"}}}`
				if tc.stripOwners {
					patch = `{"metadata":{"ownerReferences":null,"annotations":{"equipo":"marketing"}}}`
				}
				if err := k8sClient.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
					t.Fatal(err)
				}
			}
			if err := k8sClient.Delete(ctx, old); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the old Promocion is gone", func() error {
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(old), &Promocion{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("still there: %w", err)
				}
				return nil
			})

			startOperator(t, ns)
			p := createPromocion(t, ns, "rebajas-verano", "Después", 3)
			eventually(t, "the same children, now the new Promocion's", func() error {
				if err := getChildren(p, c); err != nil {
					return err
				}
				for _, obj := range c.objects() {
					if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != p.UID {
						return fmt.Errorf("%s controlled by %+v", kindName(t, obj), ref)
					}
					if obj.GetUID() != uids[kindName(t, obj)] {
						return fmt.Errorf("%s was made anew, not taken back", kindName(t, obj))
					}
					if obj.GetAnnotations()["equipo"] != "marketing" {
						return fmt.Errorf("%s lost an annotation that is not the operator's: %v", kindName(t, obj), obj.GetAnnotations())
					}
				}
				if !strings.Contains(c.cm.Data[pageKey], "<h1>Después</h1>") {
					return fmt.Errorf("page %q", c.cm.Data[pageKey])
				}
				return nil
			})
		})
	}
}

// An orphan is not taken back for a Promocion being deleted that the cache
// still shows alive: kubectl delete --cascade=orphan makes the orphans while
// the Promocion waits on its orphan finalizer, and taking them back then hands
// them to the garbage collector with it. Here a finalizer of the test's holds
// the deletion, and the reconciler is handed the copy read before it.
func TestNoTakeBackForAPromocionBeingDeleted(t *testing.T) {
	ns, stop := namespaceWithOperator(t)
	p := createPromocion(t, ns, "rebajas-verano", "Hasta -50%", 1)
	c := waitForChildren(t, p)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stale := getPromocion(t, p)
	for _, obj := range c.objects() { // what the garbage collector does for --cascade=orphan
		if err := k8sClient.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`))); err != nil {
			t.Fatal(err)
		}
	}
	held := holdDeletion(t, getPromocion(t, p))
	if err := k8sClient.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}

	_, err := newReconciler(t, k8sClient).applyChildren(ctx, stale)
	if !every(err, isPromocionGoing) {
		t.Errorf("applyChildren for a Promocion being deleted: %v, want only %v", err, errPromocionGoing)
	}
	if err := getChildren(p, c); err != nil {
		t.Fatal(err)
	}
	for _, obj := range c.objects() {
		if refs := obj.GetOwnerReferences(); len(refs) > 0 {
			t.Errorf("%s %s taken back by a Promocion being deleted: %+v", kindName(t, obj), obj.GetName(), refs)
		}
	}
}

// A Promocion's children are not made anew for a Promocion that the cache
// still shows but the API server no longer has, or is deleting. The garbage
// collector deletes the children after the Promocion, and the children's
// watches may bring that to the operator before the Promocion's own; a repair
// then would make children for nobody and tell of them in an Event. envtest
// runs no garbage collector and cannot order the watches, so the test does
// the collector's part, and hands the reconciler the copy the cache held.
func TestNoChildMadeForADeletedPromocion(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold bool // a finalizer holds the deletion, as a foreground delete does
	}{{"gone", false}, {"going", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ns, stop := namespaceWithOperator(t)
			p := createPromocion(t, ns, "rebajas-verano", "Hasta -50%", 1)
			c := waitForChildren(t, p)
			eventually(t, "the status observes the Promocion", func() error {
				if g := getPromocion(t, p).Status.ObservedGeneration; g == 0 {
					return fmt.Errorf("observedGeneration %d", g)
				}
				return nil
			})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			stale := getPromocion(t, p)
			if tc.hold {
				stale = holdDeletion(t, stale)
			}
			if err := k8sClient.Delete(ctx, p); err != nil {
				t.Fatal(err)
			}
			for _, obj := range c.objects() { // the garbage collector's part
				if err := k8sClient.Delete(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			before, err := promocionIfThere(p)
			if err != nil {
				t.Fatal(err)
			}

			r := newReconciler(t, cachedCopy{k8sClient, stale})
			recorder := events.NewFakeRecorder(10)
			r.Recorder = recorder
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
				t.Errorf("Reconcile: %v, want nil", err)
			}
			for _, k := range childKinds {
				obj := k.New()
				if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: k.Name(p)}, obj); !apierrors.IsNotFound(err) {
					t.Errorf("%s %s made for a Promocion %s: %v", k.Kind, k.Name(p), tc.name, err)
				}
			}
			if len(recorder.Events) > 0 {
				t.Errorf("an Event about a Promocion %s: %s", tc.name, <-recorder.Events)
			}
			after, err := promocionIfThere(p)
			if err != nil {
				t.Fatal(err)
			}
			if (before == nil) != (after == nil) || before != nil && before.ResourceVersion != after.ResourceVersion {
				t.Errorf("the Promocion %s was written: %+v, then %+v", tc.name, before, after)
			}
		})
	}
}

// holdDeletion puts a finalizer of the test's on p, so that a delete leaves
// it going, not gone, until the test ends; it returns p as written.
func holdDeletion(t *testing.T, p *Promocion) *Promocion {
	t.Helper()
	held := p.DeepCopy()
	held.Finalizers = append(held.Finalizers, "test.tienda.example.com/sujeta")
	if err := k8sClient.Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8sClient.Patch(ctx, held.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	return held
}

// promocionIfThere reads p from the API server: nil if it is gone.
func promocionIfThere(p *Promocion) (*Promocion, error) {
	var got Promocion
	err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &got)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return &got, err
}

// cachedCopy is a client whose reads of a Promocion return one copy of it, as
// a cache that has not yet seen the Promocion's deletion does.
type cachedCopy struct {
	client.Client
	promo *Promocion
}

func (c cachedCopy) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if p, ok := obj.(*Promocion); ok && key == client.ObjectKeyFromObject(c.promo) {
		c.promo.DeepCopyInto(p)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// A reconcile that read a Promocion before the watch brought back the
// operator's own last status write, which the watch drops as the operator's,
// must not take its older copy for caught up: the API server would keep that
// write's status for good (the chaos suite's lagging-own-status found a
// Promocion Desplegando so). The reconciler here reads straight from the API
// server, as a cache that has just caught up does.
func TestOwnStatusWriteSeenMidReconcile(t *testing.T) {
	p := promocionAlone(t, "https://tienda.example.com", 1)
	r := newReconciler(t, k8sClient)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
		t.Fatal(err)
	}
	read := getPromocion(t, p) // what a reconcile read, and computes again

	// The operator's next status write, as updateStatus makes it, and the
	// watch bringing it back.
	next := read.DeepCopy()
	next.Status.Conditions = nil
	r.own.writing(next)
	if err := r.Status().Update(ctx, next); err != nil {
		t.Fatal(err)
	}
	r.own.wrote(next, true)
	if !r.own.seen(next) {
		t.Fatal("the operator's own write, coming back, is not taken as its own")
	}

	if err := r.updateStatus(ctx, read, *read.Status.DeepCopy()); !apierrors.IsConflict(err) {
		t.Errorf("a reconcile on the copy from before its own write found its status written: %v, want a conflict that runs it again", err)
	}
	now := getPromocion(t, p)
	if err := r.updateStatus(ctx, now, *now.Status.DeepCopy()); err != nil {
		t.Errorf("a reconcile on the current copy, its status unchanged: %v, want nil", err)
	}
}

// 10. The manager stops when asked, and leaves nothing reconciling behind.
func TestManagerStopsCleanly(t *testing.T) {
	_, c, stop := runningPromocion(t)
	if err := stop(); err != nil {
		t.Fatalf("the manager returned %v, want nil", err)
	}
	// A goroutine runs the controller's code while a frame of its stack is
	// that code. Its "created by" line does not count: a worker that has
	// returned, its Done counted, may still be on its way out (goexit).
	reconciling := regexp.MustCompile(`PromocionReconciler|controller-runtime/pkg/internal/controller`)
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(stacks, "\n\n") {
		frames, _, _ := strings.Cut(g, "\ncreated by ")
		if reconciling.MatchString(frames) {
			t.Errorf("goroutines of the controller outlived the manager, among them:\n%s\n\nAll:\n%s", g, stacks)
			break
		}
	}
	// And nothing acts on the world any more.
	if err := k8sClient.Delete(ctx, c.svc); err != nil {
		t.Fatal(err)
	}
	// Nothing can say "I did nothing" but time: a running operator makes the
	// Service again within milliseconds (TestDeletedChildrenComeBack), so 2 s is ample.
	time.Sleep(2 * time.Second)
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c.svc), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Service came back after the manager stopped: %v", err)
	}
}

// A conflict on one child must not hide a refusal on another: the reconcile
// reports the refusal, in its error and in the status. Both are the API
// server's own answers: the ConfigMap is changed by someone else between the
// reconciler's read and its write, and the reconciler's user may not update
// Deployments.
func TestConflictDoesNotHideARefusal(t *testing.T) {
	p := promocionAlone(t, "https://tienda.example.com", 3)
	ns := p.Namespace
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}
	if _, err := newReconciler(t, k8sClient).Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	p = getPromocion(t, p)
	p.Spec.Banner = "Rebajas de invierno" // the page and the Deployment's template must change
	if err := k8sClient.Update(ctx, p); err != nil {
		t.Fatal(err)
	}

	const user = "sin-deployments"
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: []string{"get", "list", "watch", "create", "update"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"tienda.example.com"}, Resources: []string{"promociones"}, Verbs: []string{"get"}},
		{APIGroups: []string{"tienda.example.com"}, Resources: []string{"promociones/status"}, Verbs: []string{"update"}},
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns}, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(as, client.Options{Scheme: k8sClient.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigMapName(p)}}
	raced := false
	r := newReconciler(t, racingConfigMapClient{c, func() {
		raced = true
		patch := []byte(`{"metadata":{"annotations":{"equipo":"marketing"}}}`)
		if err := k8sClient.Patch(ctx, cm.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}})

	res, err := r.Reconcile(ctx, req)
	if !raced || !some(err, apierrors.IsConflict) || !some(err, apierrors.IsForbidden) {
		t.Fatalf("want a conflict on the ConfigMap and a refusal on the Deployment, got %v", err)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("the refusal was taken for a routine conflict: result %+v", res)
	}
	degraded := meta.FindStatusCondition(getPromocion(t, p).Status.Conditions, ConditionDegraded)
	if degraded == nil || degraded.Status != metav1.ConditionTrue || !strings.Contains(degraded.Message, "forbidden") {
		t.Errorf("the status does not report the refusal: Degraded %+v", degraded)
	}
}

// racingConfigMapClient lets someone else write a ConfigMap just before the
// reconciler updates it, so that the API server answers with a real conflict.
type racingConfigMapClient struct {
	client.Client
	race func()
}

func (c racingConfigMapClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		c.race()
	}
	return c.Client.Update(ctx, obj, opts...)
}

// racingClient lets someone else write the Promocion just before the reconciler
// writes its status, so that the API server answers with a real conflict.
type racingClient struct {
	client.Client
	race func()
}

func (c racingClient) Status() client.SubResourceWriter {
	c.race()
	return c.Client.Status()
}

// An optimistic-concurrency conflict is routine: the reconcile asks to come back
// soon instead of returning an error that would be logged.
func TestConflictRequeuesQuietly(t *testing.T) {
	p := promocionAlone(t, "https://tienda.example.com", 3)
	raced := false
	race := func() {
		raced = true
		patch := []byte(`{"metadata":{"annotations":{"equipo":"marketing"}}}`)
		if err := k8sClient.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	r := newReconciler(t, racingClient{k8sClient, race})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}

	res, err := r.Reconcile(ctx, req)
	if !raced || err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("after a conflict: result %+v, error %v; want a requeue and no error", res, err)
	}
	r.Client = k8sClient
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("the next reconcile: %v", err)
	}
	if got := getPromocion(t, p); got.Status.Fase != FaseDesplegando || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("the next reconcile did not write the status: %+v", got.Status)
	}
}

// A Promocion blocked by an object of its Service's name that is not its own
// fails again on every event of its other children. Once the blocker is
// deleted, as the condition asks, no event comes (the cache holds only the
// operator's labelled children): the Promocion must be retried within
// maxRetryDelay, however often it failed before. controller-runtime's default
// wait, after the thirty failures here, is the 1000 s cap.
func TestBlockedPromocionIsRetriedSoon(t *testing.T) {
	ns, _ := namespaceWithOperator(t)
	blocker := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "rebajas-verano", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := k8sClient.Create(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	p := createPromocion(t, ns, "rebajas-verano", "Hasta -50%", 1)
	dep := &appsv1.Deployment{}
	eventually(t, "the Deployment exists", func() error {
		return k8sClient.Get(ctx, client.ObjectKeyFromObject(p), dep)
	})
	for i := range 30 { // each queues a reconcile, which fails on the blocker
		setDeploymentStatus(t, dep, int32(i%2))
		time.Sleep(20 * time.Millisecond)
	}
	if err := k8sClient.Delete(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventuallyWithin(t, "the Promocion's own Service, after the blocker's deletion", maxRetryDelay+10*time.Second, func() error {
		var svc corev1.Service
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &svc); err != nil {
			return err
		}
		if !metav1.IsControlledBy(&svc, getPromocion(t, p)) {
			return errors.New("the Service is not the Promocion's")
		}
		return nil
	})
	t.Logf("the Service made %s after the blocker's deletion", time.Since(deleted).Round(time.Millisecond))
}
