//go:build unscoped

package main

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Built only by the benchmarks (go build -tags unscoped), to measure what the
// scoping of cache_scope.go saves: this operator caches every ConfigMap,
// Deployment and Service of the cluster, as one without scoping would.
func cacheByObject() map[client.Object]cache.ByObject { return nil }
