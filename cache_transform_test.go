package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The cache's transform drops fields the operator never reads; it must keep
// every field it reads (the status it computes is the same from the cached
// copy), and no write the operator makes from a cached copy may lose what was
// dropped: the API server keeps it, and the operator, restarted on a world
// that holds all of it, repairs from its cache without touching it.
func TestCacheTransformLosesNothing(t *testing.T) {
	p, c, stop := runningPromocion(t)
	conditions := []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: "ReplicaSet has successfully progressed."},
	}
	eventually(t, "the Deployment controller's status, conditions included", func() error {
		var d appsv1.Deployment
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c.dep), &d); err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, Conditions: conditions}
		return k8sClient.Status().Update(ctx, &d)
	})
	svcConditions := []metav1.Condition{{Type: "LoadBalancerReady", Status: metav1.ConditionFalse, Reason: "Pending", Message: "no load balancer here", LastTransitionTime: metav1.Now()}}
	eventually(t, "a Service status", func() error {
		var s corev1.Service
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c.svc), &s); err != nil {
			return err
		}
		s.Status.Conditions = svcConditions
		return k8sClient.Status().Update(ctx, &s)
	})
	const applied = `{"apiVersion":"tienda.example.com/v1","kind":"Promocion","spec":{"banner":"https://tienda.example.com","replicas":3}}`
	eventually(t, "kubectl apply's annotation on the Promocion", func() error {
		got := getPromocion(t, p)
		metav1.SetMetaDataAnnotation(&got.ObjectMeta, corev1.LastAppliedConfigAnnotation, applied)
		return k8sClient.Update(ctx, got)
	})
	eventually(t, "Listo", func() error {
		if f := getPromocion(t, p).Status.Fase; f != FaseListo {
			return fmt.Errorf("fase %q", f)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// What the cache holds, from what the API server holds.
	if err := getChildren(p, c); err != nil {
		t.Fatal(err)
	}
	stored := getPromocion(t, p)
	transform := newCacheTransform()
	cached := func(obj client.Object) client.Object {
		out, err := transform(obj.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		return out.(client.Object)
	}
	dep, svc, promo := cached(c.dep).(*appsv1.Deployment), cached(c.svc).(*corev1.Service), cached(stored).(*Promocion)
	if len(dep.Status.Conditions)+len(svc.Status.Conditions) != 0 || promo.Annotations[corev1.LastAppliedConfigAnnotation] != "" {
		t.Errorf("the transform kept what it is meant to drop: %d and %d conditions, annotation %q",
			len(dep.Status.Conditions), len(svc.Status.Conditions), promo.Annotations[corev1.LastAppliedConfigAnnotation])
	}
	now := metav1.Now()
	if a, b := computeStatus(stored, c.dep, nil, now), computeStatus(promo, dep, nil, now); !equality.Semantic.DeepEqual(a, b) {
		t.Errorf("the status computed from the cached copies differs:\n%+v\n%+v", b, a)
	}
	for i, k := range childKinds {
		fromAPI, fromCache := c.all[i].DeepCopyObject().(client.Object), cached(c.all[i])
		k.Mutate(fromAPI, stored, DefaultWebImage)
		k.Mutate(fromCache, promo, DefaultWebImage)
		if fromAPI.GetResourceVersion() != fromCache.GetResourceVersion() || !equality.Semantic.DeepEqual(childSpec(fromAPI), childSpec(fromCache)) {
			t.Errorf("%s: what the operator would write differs from the cached copy", k.Kind)
		}
	}

	// Writes from the cached copies: the dropped fields stay on the server.
	dep.Spec.Replicas = new(int32(5)) // a hand scale, for the operator to undo from its cache below
	svc.Labels["equipo"] = "marketing"
	promo.Status.ReadyReplicas = 42 // wrong, for the operator to put right below
	for what, err := range map[string]error{"Deployment": k8sClient.Update(ctx, dep), "Service": k8sClient.Update(ctx, svc), "Promocion status": k8sClient.Status().Update(ctx, promo)} {
		if err != nil {
			t.Fatalf("updating the %s from its cached copy: %v", what, err)
		}
	}
	kept := func() error {
		if err := getChildren(p, c); err != nil {
			return err
		}
		got := getPromocion(t, p)
		switch {
		case !equality.Semantic.DeepEqual(conditions, c.dep.Status.Conditions):
			return fmt.Errorf("the Deployment's conditions are now %+v", c.dep.Status.Conditions)
		case len(c.svc.Status.Conditions) != 1 || c.svc.Status.Conditions[0].Message != svcConditions[0].Message:
			return fmt.Errorf("the Service's status is now %+v", c.svc.Status)
		case got.Annotations[corev1.LastAppliedConfigAnnotation] != applied:
			return fmt.Errorf("the Promocion's annotations are now %v", got.Annotations)
		}
		return nil
	}
	if err := kept(); err != nil {
		t.Fatal(err)
	}

	// The operator, repairing from its cache, keeps them too.
	startOperator(t, p.Namespace)
	eventually(t, "the hand scale undone and the status put right", func() error {
		if err := getChildren(p, c); err != nil {
			return err
		}
		if r, got := *c.dep.Spec.Replicas, getPromocion(t, p).Status.ReadyReplicas; r != 3 || got == 42 {
			return fmt.Errorf("replicas %d, status readyReplicas %d", r, got)
		}
		return nil
	})
	if err := kept(); err != nil {
		t.Error(err)
	}
}

// childSpec is what a child's kind says it should be: its data or spec.
func childSpec(obj client.Object) any {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return o.Data
	case *appsv1.Deployment:
		return o.Spec
	case *corev1.Service:
		return o.Spec
	}
	return obj
}

// Children alike hold one copy of what they share in the cache, and the
// sharing changes no child's values: each cached child equals its stored
// self, field for field, whatever it shares with the others.
func TestCacheSharesWhatChildrenHoldAlike(t *testing.T) {
	transform := newCacheTransform()
	maxSurge := intstr.FromString("25%")
	cache := func(obj client.Object) client.Object {
		t.Helper()
		// As the informer decodes it: every string a copy of its own.
		decoded := obj.DeepCopyObject().(client.Object)
		if raw, err := json.Marshal(obj); err != nil || json.Unmarshal(raw, decoded) != nil {
			t.Fatalf("%s: a JSON round trip failed: %v", obj.GetName(), err)
		}
		out, err := transform(decoded)
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(obj, out) {
			t.Errorf("%s: the cached copy differs from the stored object:\n%+v\n%+v", obj.GetName(), out, obj)
		}
		return out.(client.Object)
	}
	deployment := func(name, image string) *appsv1.Deployment {
		p := &Promocion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tienda"}, Spec: PromocionSpec{Banner: "Oferta " + name, Replicas: new(int32(2))}}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace, OwnerReferences: controlledBy(name)}}
		mutateDeployment(d, p, image)
		// What the API server's defaults and the Deployment controller add.
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: &maxSurge}}
		d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
		return cache(d).(*appsv1.Deployment)
	}
	service := func(name string) *corev1.Service {
		p := &Promocion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tienda"}}
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace, OwnerReferences: controlledBy(name)}}
		mutateService(s, p)
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		s.Spec.IPFamilyPolicy = new(corev1.IPFamilyPolicySingleStack)
		s.Spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyCluster)
		return cache(s).(*corev1.Service)
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	sameString := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

	// Names of more than one byte: Go keeps a single copy of each one-byte string anyway.
	a, b := deployment("oferta-a", DefaultWebImage), deployment("oferta-b", DefaultWebImage)
	sa, sb := service("oferta-a"), service("oferta-b")
	for what, shared := range map[string]bool{
		"the web container":                 same(a.Spec.Template.Spec.Containers, b.Spec.Template.Spec.Containers),
		"the pod's security context":        same(a.Spec.Template.Spec.SecurityContext, b.Spec.Template.Spec.SecurityContext),
		"the rollout strategy":              same(a.Spec.Strategy.RollingUpdate, b.Spec.Strategy.RollingUpdate),
		"a's labels, with its pods'":        same(a.Labels, a.Spec.Template.Labels),
		"the Deployment's annotations":      same(a.Annotations, b.Annotations),
		"the Service's port":                same(sa.Spec.Ports, sb.Spec.Ports),
		"the Service's IP families":         same(sa.Spec.IPFamilies, sb.Spec.IPFamilies),
		"the Service's IP family policy":    same(sa.Spec.IPFamilyPolicy, sb.Spec.IPFamilyPolicy),
		"the Service's internal traffic":    same(sa.Spec.InternalTrafficPolicy, sb.Spec.InternalTrafficPolicy),
		"a label's key, with the constant":  sameKey(a.Labels, LabelManagedBy),
		"a selector's key, with the label":  sameKey(sa.Spec.Selector, LabelPromocion),
		"a label's value, with the name":    sameString(a.Labels[LabelPromocion], a.Name),
		"a selector's value, with the name": sameString(a.Spec.Selector.MatchLabels[LabelPromocion], a.Name),
		"a Service's label, with its name":  sameString(sa.Labels["app.kubernetes.io/instance"], sa.Name),
		"a constant value":                  sameString(sa.Labels[LabelManagedBy], operatorName),
	} {
		if !shared {
			t.Errorf("two children alike, or a child's maps, each keep their own copy of %s", what)
		}
	}
	if same(a.Spec.Template.Annotations, b.Spec.Template.Annotations) {
		t.Error("two Deployments of different banners share their pods' annotations, which hash each page")
	}
	if same(a.Labels, b.Labels) {
		t.Error("two Promociones' children share their labels, which name each Promocion")
	}

	// A web image rolling out: the children differ, each keeps what it holds.
	c := deployment("c", "nginx:otra")
	if same(a.Spec.Template.Spec.Containers, c.Spec.Template.Spec.Containers) || c.Spec.Template.Spec.Containers[0].Image != "nginx:otra" {
		t.Errorf("a Deployment of another image got the first one's container: %s", c.Spec.Template.Spec.Containers[0].Image)
	}
	if a.Spec.Template.Spec.Containers[0].Image != DefaultWebImage {
		t.Errorf("the first Deployment's container changed: %s", a.Spec.Template.Spec.Containers[0].Image)
	}

	// Someone labelled the Deployment alone: its pods' labels stay as they are.
	d := deployment("d", DefaultWebImage).DeepCopy()
	d.Labels["equipo"] = "marketing"
	if d = cache(d).(*appsv1.Deployment); same(d.Labels, d.Spec.Template.Labels) {
		t.Error("a Deployment's labels and its pods' differ, yet they share one map")
	}
}

// controlledBy is the ownerReferences that SetControllerReference writes for
// a Promocion of that name.
func controlledBy(promocion string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: GroupVersion.String(), Kind: "Promocion", Name: promocion,
		UID: types.UID("uid-" + promocion), Controller: new(true), BlockOwnerDeletion: new(true)}}
}

// Whatever carries the operator's label reaches the cache, whoever set it.
// Of an object that is not the child of the Promocion controlling it, the
// cache keeps a stub: what the claim reads, and none of the data, however
// big. The operator's own children, and Promociones, keep every field the
// operator reads; of a Promocion, nothing its author may make big but the
// banner, which the schema bounds.
func TestCacheKeepsAStubOfOthersObjects(t *testing.T) {
	transform := newCacheTransform()
	big := strings.Repeat("x", 900<<10)
	ours := map[string]string{LabelManagedBy: operatorName, LabelPromocion: "oferta", "relleno": big[:63]}
	configMap := func(name string, owners []metav1.OwnerReference) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tienda", UID: "uid-cm", ResourceVersion: "7",
			Labels: maps.Clone(ours), Annotations: map[string]string{"relleno": big}, OwnerReferences: owners},
			Data: map[string]string{pageKey: big}}
	}
	otherController := controlledBy("oferta")
	otherController[0].APIVersion = "tienda.otra.example.com/v1"
	stubs := map[string]client.Object{
		"no owner":                        configMap("oferta-html", nil),
		"an owner that is not controller": configMap("oferta-html", []metav1.OwnerReference{{APIVersion: GroupVersion.String(), Kind: "Promocion", Name: "oferta", UID: "u"}}),
		"controlled by another group's":   configMap("oferta-html", otherController),
		"a Promocion's, not named its":    configMap("otra-html", controlledBy("oferta")),
		"a Deployment with no owner": &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "oferta", Namespace: "tienda", Labels: maps.Clone(ours)},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"relleno": big}}}}},
		"a Service named as another's ConfigMap": &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "oferta-html", Namespace: "tienda",
			Labels: maps.Clone(ours), OwnerReferences: controlledBy("oferta")}, Spec: corev1.ServiceSpec{ExternalName: big}},
	}
	for what, obj := range stubs {
		out, err := transform(obj.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		got := out.(client.Object)
		if size := len(mustJSON(t, got)); size > 1024 {
			t.Errorf("%s: the cache keeps %d bytes of it, want a stub:\n%.300s", what, size, mustJSON(t, got))
		}
		want := map[string]string{LabelManagedBy: operatorName, LabelPromocion: "oferta"}
		if reflect.TypeOf(got) != reflect.TypeOf(obj) || got.GetName() != obj.GetName() || got.GetUID() != obj.GetUID() ||
			got.GetResourceVersion() != obj.GetResourceVersion() || !maps.Equal(got.GetLabels(), want) ||
			!reflect.DeepEqual(metav1.GetControllerOf(got), metav1.GetControllerOf(obj)) {
			t.Errorf("%s: the stub lost what the claim reads: %.500s", what, mustJSON(t, got))
		}
		if cachedWhole(got) {
			t.Errorf("%s: the stub is taken for a whole child", what)
		}
	}

	// The children, and the Promocion: whole, but what it never reads.
	whole := configMap("oferta-html", controlledBy("oferta"))
	if out, _ := transform(whole.DeepCopy()); out.(*corev1.ConfigMap).Data[pageKey] != big {
		t.Error("the Promocion's own ConfigMap lost its page in the cache")
	}
	p := &Promocion{ObjectMeta: metav1.ObjectMeta{Name: "oferta", Namespace: "tienda", UID: "uid-oferta", ResourceVersion: "9", Generation: 2,
		Labels: map[string]string{"relleno": big[:63]}, Annotations: map[string]string{"relleno": big, corev1.LastAppliedConfigAnnotation: big},
		Finalizers: []string{"tienda.example.com/" + big[:200]}, OwnerReferences: []metav1.OwnerReference{{Name: big[:253]}}},
		Spec: PromocionSpec{Banner: "Oferta", Replicas: new(int32(2))}, Status: PromocionStatus{ObservedGeneration: 1, Fase: FaseListo}}
	out, _ := transform(p.DeepCopy())
	cached := out.(*Promocion)
	if size := len(mustJSON(t, cached)); size > 1024 {
		t.Errorf("the cache keeps %d bytes of a Promocion whose metadata is big:\n%.300s", size, mustJSON(t, cached))
	}
	if cached.Name != p.Name || cached.UID != p.UID || cached.ResourceVersion != p.ResourceVersion || cached.Generation != p.Generation ||
		!equality.Semantic.DeepEqual(cached.Spec, p.Spec) || !equality.Semantic.DeepEqual(cached.Status, p.Status) {
		t.Errorf("the cached Promocion lost what the operator reads: %.500s", mustJSON(t, cached))
	}
}

func mustJSON(t *testing.T, obj any) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameKey says whether m's key equal to key is the same string as key, not
// an equal copy.
func sameKey(m map[string]string, key string) bool {
	for k := range m {
		if k == key {
			return unsafe.StringData(k) == unsafe.StringData(key)
		}
	}
	return false
}

// What the cache shares stays inside it: each child the operator reads from
// its cache (as it is configured in main) is the reader's own copy, so a
// mutate function changing one Deployment cannot reach another.
func TestCachedChildrenAreCopies(t *testing.T) {
	ns, _ := namespaceWithOperator(t)
	for _, name := range []string{"a", "b"} {
		waitForChildren(t, createPromocion(t, ns, name, "Oferta "+name, 1))
	}
	c := operatorCache(t, ns)
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	get := func(name string) *appsv1.Deployment {
		t.Helper()
		var d appsv1.Deployment
		eventually(t, "Deployment "+name+" in the cache", func() error {
			return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d)
		})
		return &d
	}
	a, b := get("a"), get("b")
	if &a.Spec.Template.Spec.Containers[0] == &b.Spec.Template.Spec.Containers[0] {
		t.Fatal("two Deployments read from the cache share their container")
	}
	a.Spec.Template.Spec.Containers[0].Image = "cambiada"
	a.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = a.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	a.Spec.Template.Labels["cambiada"] = "si"
	for _, d := range []*appsv1.Deployment{get("a"), get("b")} {
		ctr := d.Spec.Template.Spec.Containers[0]
		if ctr.Image != DefaultWebImage || ctr.Resources.Limits.Memory().String() != "64Mi" || d.Labels["cambiada"] != "" {
			t.Errorf("a change to a copy read from the cache reached the cache's %s: image %s, memory limit %s, labels %v",
				d.Name, ctr.Image, ctr.Resources.Limits.Memory(), d.Labels)
		}
	}
}
