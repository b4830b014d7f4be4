package framework

// Fixtures: namespaces, Promociones made many at a time, how many are
// Listo, and the oracle's judgement of a namespace.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Oracle lists how ns differs from what the specification says its
// Promociones make (oracle.go's facts).
func (h *Harness) Oracle(ns string) []Problem {
	h.T.Helper()
	problems, err := Judge(context.Background(), h.C, ns)
	if err != nil {
		h.T.Fatalf("the oracle: %v", err)
	}
	return problems
}

// Namespace creates a Namespace whose Pods go to kwok's nodes: the tests that
// make hundreds of them, or that need no process behind them, use it.
func (h *Harness) Namespace(name string) string {
	h.Kubectl("create", "namespace", name)
	h.Kubectl("annotate", "namespace", name, "scheduler.alpha.kubernetes.io/node-selector=type=kwok")
	return name
}

// DeleteNamespace deletes ns and waits until it is gone, so that its garbage
// collection does not weigh on the next measurement.
func (h *Harness) DeleteNamespace(ns string) {
	h.Kubectl("delete", "namespace", ns, "--timeout=10m")
}

// Parallel runs f(0..n-1) on workers goroutines, failing the test on an error.
// An object that already exists is not one.
func (h *Harness) Parallel(n, workers int, f func(i int) error) {
	h.T.Helper()
	if err := ParallelErr(n, workers, f); err != nil {
		h.T.Fatal(err)
	}
}

// ParallelErr is parallel for another goroutine than the test's: it returns
// the first error.
func ParallelErr(n, workers int, f func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

// CreatePromociones creates promo-0 to promo-<n-1> in ns, 32 at a time.
func (h *Harness) CreatePromociones(ns string, n, replicas int) {
	h.Parallel(n, 32, func(i int) error {
		return h.C.Create(context.Background(), Promocion(ns, i, replicas))
	})
}

func Promocion(ns string, i, replicas int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tienda.example.com/v1", "kind": "Promocion",
		"metadata": map[string]any{"name": fmt.Sprintf("promo-%d", i), "namespace": ns},
		"spec":     map[string]any{"banner": fmt.Sprintf("Oferta número %d", i), "replicas": int64(replicas)},
	}}
}

// Listo counts the Promociones of ns that are Listo.
func (h *Harness) Listo(ns string) int {
	out, _ := h.TryKubectl("get", "promociones", "-n", ns, "-o", "jsonpath={range .items[*]}{.status.fase}{\"\\n\"}{end}")
	return strings.Count(out, "Listo")
}

// WaitListo waits until n Promociones of ns are Listo.
func (h *Harness) WaitListo(ns string, n int) {
	h.T.Helper()
	h.Eventually(fmt.Sprintf("%d Promociones Listo in %s", n, ns), func() error {
		if got := h.Listo(ns); got != n {
			return fmt.Errorf("%d of %d Listo", got, n)
		}
		return nil
	})
}

// RecreationTime deletes obj and returns the time until the watch shows a new
// one (another UID): the operator's, or the one recreate makes once the
// delete has returned.
func RecreationTime(t testing.TB, c client.WithWatch, list client.ObjectList, obj client.Object, recreate func() error) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	old := obj.GetUID()
	w, err := c.Watch(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{"metadata.name": obj.GetName()},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: obj.GetResourceVersion()}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if err := c.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if recreate != nil {
		if err := recreate(); err != nil {
			t.Fatal(err)
		}
	}
	for ev := range w.ResultChan() {
		if o, ok := ev.Object.(client.Object); ok && ev.Type == watch.Added && o.GetUID() != old {
			return time.Since(start)
		}
	}
	t.Fatalf("%s %s did not come back within %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), WaitTimeout)
	return 0
}
