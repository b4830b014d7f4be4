package main

import (
	"maps"
	"reflect"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
		switch o := obj.(type) {
		case *appsv1.Deployment:
			// The Listo rule reads the counts and observedGeneration, never the
			// Deployment controller's conditions and their messages.
			o.Status.Conditions = nil
			parts.deployment(o)
		case *corev1.Service:
			o.Status = corev1.ServiceStatus{}
			parts.service(o)
		case *Promocion:
			// kubectl apply's copy of the whole Promocion, banner included.
			delete(o.Annotations, corev1.LastAppliedConfigAnnotation)
		}
		return obj, nil
	}
}

// sharedParts are the parts that every child of a kind holds alike: a
// Deployment's web container (its resources, probe and security context are
// half of what a cached Deployment takes), its pod's security context and its
// rollout strategy, a Service's port. A cached child whose part equals the
// last one seen points to that copy instead of keeping its own.
//
// That is safe because nothing writes to an object in the cache: the informer
// replaces a changed object whole, and every read the operator makes of a
// child from the cache is a deep copy (only the fases collector reads without
// one, and it reads Promociones, of which nothing is shared).
type sharedParts struct {
	containers    shared[[]corev1.Container]
	podSecurity   shared[*corev1.PodSecurityContext]
	rollingUpdate shared[*appsv1.RollingUpdateDeployment]
	servicePorts  shared[[]corev1.ServicePort]
}

func (s *sharedParts) deployment(d *appsv1.Deployment) {
	pod := &d.Spec.Template.Spec
	pod.Containers = s.containers.of(pod.Containers)
	pod.SecurityContext = s.podSecurity.of(pod.SecurityContext)
	d.Spec.Strategy.RollingUpdate = s.rollingUpdate.of(d.Spec.Strategy.RollingUpdate)
	// The pods' labels are the Deployment's own (childLabels) unless someone
	// changed either: one map for both.
	if maps.Equal(d.Spec.Template.Labels, d.Labels) {
		d.Spec.Template.Labels = d.Labels
	}
}

func (s *sharedParts) service(svc *corev1.Service) {
	svc.Spec.Ports = s.servicePorts.of(svc.Spec.Ports)
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
