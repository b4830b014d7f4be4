package main

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// cacheTransform is what the cache keeps of each object: every field the
// operator reads, and less than the API server sends. What it drops is only
// what the operator never reads and what the API server ignores in the
// writes the operator makes from a cached copy (an update of a Deployment or
// a Service keeps their status as stored; a status update of a Promocion
// keeps its metadata as stored), so that no write loses it. At 1000
// Promociones every byte here is a thousand in the operator's memory.
func cacheTransform(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		// The Listo rule reads the counts and observedGeneration, never the
		// Deployment controller's conditions and their messages.
		o.Status.Conditions = nil
	case *corev1.Service:
		o.Status = corev1.ServiceStatus{}
	case *Promocion:
		// kubectl apply's copy of the whole Promocion, banner included.
		delete(o.Annotations, corev1.LastAppliedConfigAnnotation)
	}
	return obj, nil
}
