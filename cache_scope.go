//go:build !unscoped

package main

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cacheByObject lets into the cache only the children the operator labelled,
// not every ConfigMap, Deployment and Service of the cluster.
func cacheByObject() map[client.Object]cache.ByObject {
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: operatorName})}
	return map[client.Object]cache.ByObject{&corev1.ConfigMap{}: ours, &appsv1.Deployment{}: ours, &corev1.Service{}: ours}
}
