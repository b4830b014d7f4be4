package main

import (
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cacheByObject lets into the cache only the children the operator labelled,
// of each kind in childKinds: not every ConfigMap, Deployment and Service of
// the cluster.
func cacheByObject() map[client.Object]cache.ByObject {
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: operatorName})}
	scoped := map[client.Object]cache.ByObject{}
	for _, k := range childKinds {
		scoped[k.New()] = ours
	}
	return scoped
}
