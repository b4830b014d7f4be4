package main

import (
	"maps"
	"reflect"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// newCacheTransform returns what the cache keeps of each object: every field
// the operator reads, in less memory than the API server's copy takes. At 1000
// Promociones every byte here is a thousand in the operator's memory.
//
// It drops only what the operator never reads and what the API server
// ignores in the writes the operator makes from a cached copy (an update of a
// Deployment or a Service keeps their status as stored; a status update of a
// Promocion keeps its metadata as stored), so that no write loses it.
//
// And it shares what the children hold alike (sharedParts): the values stay
// whole, only their copies go.
func newCacheTransform() toolscache.TransformFunc {
	var parts sharedParts
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		if o, ok := obj.(client.Object); ok && !cachedWhole(o) {
			return stub(o), nil
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			// The Listo rule reads the counts and observedGeneration, never the
			// Deployment controller's conditions and their messages.
			o.Status.Conditions = nil
			parts.deployment(o)
		case *corev1.Service:
			o.Status = corev1.ServiceStatus{}
			parts.service(o)
		case *corev1.ConfigMap:
			in := &interner{}
			internMeta(&o.ObjectMeta, in)
			o.Data = in.inMap(o.Data)
		case *Promocion:
			// The operator reads none of the Promocion's labels, annotations
			// (kubectl apply's copy of it among them), finalizers or owners,
			// and its one write of a Promocion, the status, keeps the stored
			// metadata. Whoever may create Promociones may make those big.
			o.Labels, o.Annotations, o.Finalizers, o.OwnerReferences = nil, nil, nil, nil
		}
		return obj, nil
	}
}

// cachedWhole tells whether the cache keeps obj whole: a Promocion, or the
// child that the operator makes for the Promocion controlling it (its kind,
// and the name childKinds gives it for that Promocion's name). Any other
// object that carries the operator's label, and so reaches the cache, may be
// anyone's, of any size: it is kept as a stub.
func cachedWhole(obj client.Object) bool {
	k, isChild := childKindOf(obj)
	if !isChild {
		return true
	}
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return false
	}
	owner := &Promocion{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}}
	return samePromocion(*ref, owner) && k.Name(owner) == obj.GetName()
}

// childKindOf is the entry of childKinds whose objects are of obj's type.
func childKindOf(obj client.Object) (childKind, bool) {
	for _, k := range childKinds {
		if reflect.TypeOf(k.New()) == reflect.TypeOf(obj) {
			return k, true
		}
	}
	return childKind{}, false
}

// stub is what the cache keeps of an object that it does not keep whole:
// what the claim reads (its UID, its controller, the operator's labels) and
// what a write from it would be checked against (its resourceVersion),
// nothing of its data or spec. A few hundred bytes, however big the object.
// The operator never writes from a stub: a child it may take back is read
// whole from the API server first (applyChild).
func stub(obj client.Object) client.Object {
	s := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	s.SetName(obj.GetName())
	s.SetNamespace(obj.GetNamespace())
	s.SetUID(obj.GetUID())
	s.SetResourceVersion(obj.GetResourceVersion())
	s.SetGeneration(obj.GetGeneration())
	s.SetCreationTimestamp(obj.GetCreationTimestamp())
	s.SetDeletionTimestamp(obj.GetDeletionTimestamp())
	if ref := metav1.GetControllerOf(obj); ref != nil {
		s.SetOwnerReferences([]metav1.OwnerReference{*ref})
	}
	l := obj.GetLabels()
	kept := map[string]string{}
	for _, key := range []string{LabelManagedBy, LabelPromocion} {
		if v, ok := l[key]; ok {
			kept[key] = v
		}
	}
	s.SetLabels(kept)
	return s
}

// sharedParts are the parts that every child of a kind holds alike: a
// Deployment's web container (its resources, probe and security context are
// half of what a cached Deployment takes), its pod's security context and its
// rollout strategy, a Service's port and IP settings. A cached child whose
// part equals the last one seen points to that copy instead of keeping its own.
//
// That is safe because nothing writes to an object in the cache: the informer
// replaces a changed object whole, and every read the operator makes of a
// child from the cache is a deep copy (only the fases collector reads without
// one, and it reads Promociones, of which nothing is shared).
type sharedParts struct {
	containers    shared[[]corev1.Container]
	podSecurity   shared[*corev1.PodSecurityContext]
	rollingUpdate shared[*appsv1.RollingUpdateDeployment]
	// The Deployment controller's revision annotation, and the page's hash
	// on the pods: alike on Deployments of one revision and one banner.
	annotations    shared[map[string]string]
	podAnnotations shared[map[string]string]
	servicePorts   shared[[]corev1.ServicePort]
	ipFamilies     shared[[]corev1.IPFamily]
	ipPolicy       shared[*corev1.IPFamilyPolicy]
	trafficPolicy  shared[*corev1.ServiceInternalTrafficPolicy]
}

func (s *sharedParts) deployment(d *appsv1.Deployment) {
	pod := &d.Spec.Template.Spec
	pod.Containers = s.containers.of(pod.Containers)
	pod.SecurityContext = s.podSecurity.of(pod.SecurityContext)
	d.Spec.Strategy.RollingUpdate = s.rollingUpdate.of(d.Spec.Strategy.RollingUpdate)
	in := &interner{}
	internMeta(&d.ObjectMeta, in)
	internMeta(&d.Spec.Template.ObjectMeta, in)
	if d.Spec.Selector != nil {
		d.Spec.Selector.MatchLabels = in.inMap(d.Spec.Selector.MatchLabels)
	}
	d.Annotations = s.annotations.of(d.Annotations)
	d.Spec.Template.Annotations = s.podAnnotations.of(d.Spec.Template.Annotations)
	// The pods' labels are the Deployment's own (childLabels) unless someone
	// changed either: one map for both.
	if maps.Equal(d.Spec.Template.Labels, d.Labels) {
		d.Spec.Template.Labels = d.Labels
	}
}

func (s *sharedParts) service(svc *corev1.Service) {
	in := &interner{}
	internMeta(&svc.ObjectMeta, in)
	svc.Spec.Selector = in.inMap(svc.Spec.Selector)
	svc.Spec.Ports = s.servicePorts.of(svc.Spec.Ports)
	svc.Spec.IPFamilies = s.ipFamilies.of(svc.Spec.IPFamilies)
	svc.Spec.IPFamilyPolicy = s.ipPolicy.of(svc.Spec.IPFamilyPolicy)
	svc.Spec.InternalTrafficPolicy = s.trafficPolicy.of(svc.Spec.InternalTrafficPolicy)
}

// interner gives one copy of each string that a cached object's labels,
// annotations and selectors hold: the keys and values that every child
// holds alike (knownStrings) point to the program's own constants, and a
// value repeated within the object (its Promocion's name, in two labels
// on each of its maps) to its first copy. Each map is made again, since a
// map's keys cannot be exchanged in place; the decoded copies go with the
// old map.
type interner struct {
	seen []string
}

// knownStrings are the label and annotation keys and values that the
// operator writes on every child, and the Deployment controller's.
var knownStrings = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", LabelManagedBy, LabelPromocion,
		"promocion", operatorName, AnnotationPageHash, "deployment.kubernetes.io/revision", pageKey} {
		m[s] = s
	}
	return m
}()

func (in *interner) of(s string) string {
	if k, ok := knownStrings[s]; ok {
		return k
	}
	for _, seen := range in.seen {
		if seen == s {
			return seen
		}
	}
	in.seen = append(in.seen, s)
	return s
}

func (in *interner) inMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[in.of(k)] = in.of(v)
	}
	return out
}

func internMeta(m *metav1.ObjectMeta, in *interner) {
	m.Name = in.of(m.Name)
	m.Labels = in.inMap(m.Labels)
	m.Annotations = in.inMap(m.Annotations)
}

// shared holds the last value seen of one part. A value equal to it, field
// for field, is exchanged for it; any other becomes the new last. One value
// kept, not a table: the children of a kind differ only while a new web image
// or a change of the operator rolls out, and a part not shared then costs
// only its own copy.
type shared[T any] struct {
	mu   sync.Mutex // the informers of several kinds transform at once
	last T
}

func (s *shared[T]) of(v T) T {
	s.mu.Lock()
	defer s.mu.Unlock()
	// reflect.DeepEqual, not the semantic equality: only a value identical
	// to the last (a quantity written the same way, an empty list as empty)
	// may stand in for it.
	if reflect.DeepEqual(s.last, v) {
		return s.last
	}
	s.last = v
	return v
}
