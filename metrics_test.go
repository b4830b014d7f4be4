package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// timeToListoCount is how many Promociones the histogram has seen reach Listo.
func timeToListoCount(t *testing.T) uint64 {
	t.Helper()
	var m dto.Metric
	if err := timeToListo.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// requestsTimed counts the requests to the API server that
// rest_client_request_duration_seconds has timed, every verb together.
func requestsTimed(t *testing.T) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() == "rest_client_request_duration_seconds" {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func TestObserveListo(t *testing.T) {
	now := time.Now()
	deploying := func(since time.Duration) PromocionStatus {
		return PromocionStatus{Fase: FaseDesplegando, Conditions: []metav1.Condition{
			{Type: ConditionProgressing, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-since))}}}
	}
	listo := PromocionStatus{Fase: FaseListo}
	for _, tc := range []struct {
		what   string
		before PromocionStatus
		after  PromocionStatus
		counts bool
	}{
		{"Desplegando to Listo", deploying(time.Minute), listo, true},
		{"Listo to Listo", listo, listo, false},
		{"Desplegando to Desplegando", deploying(time.Minute), PromocionStatus{Fase: FaseDesplegando}, false},
		{"no Progressing condition", PromocionStatus{Fase: FaseDesplegando}, listo, false},
	} {
		before := timeToListoCount(t)
		observeListo(tc.before, tc.after, now)
		if got := timeToListoCount(t) - before; got != map[bool]uint64{true: 1, false: 0}[tc.counts] {
			t.Errorf("%s: %d observations", tc.what, got)
		}
	}
}

func TestIsDrift(t *testing.T) {
	for _, tc := range []struct {
		generation, observed int64
		want                 bool
	}{
		{1, 0, false}, // never reconciled: the children are new
		{2, 1, false}, // the spec changed: the children follow it
		{2, 2, true},  // the spec is as last seen: someone else changed the child
	} {
		p := &Promocion{ObjectMeta: metav1.ObjectMeta{Generation: tc.generation}, Status: PromocionStatus{ObservedGeneration: tc.observed}}
		if got := isDrift(p); got != tc.want {
			t.Errorf("generation %d, observed %d: %v, want %v", tc.generation, tc.observed, got, tc.want)
		}
	}
}

// The Promociones' metrics, as a scrape sees them: by fase, the time to
// Listo, a deleted child put back, a child owned by someone else.
func TestPromocionMetrics(t *testing.T) {
	p, c, _ := runningPromocion(t)
	gauge := func(name, fase string) float64 {
		families, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == name && (fase == "-" || len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == fase) {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	eventually(t, "one Promocion Desplegando, for a while", func() error {
		if n := gauge("promociones", FaseDesplegando); n < 1 {
			return fmt.Errorf("promociones{fase=Desplegando} %v", n)
		}
		if s := gauge("promociones_not_listo_oldest_seconds", "-"); s <= 0 {
			return fmt.Errorf("promociones_not_listo_oldest_seconds %v", s)
		}
		return nil
	})

	if n := requestsTimed(t); n == 0 {
		t.Error("no request to the API server timed in rest_client_request_duration_seconds")
	}
	// The operator's writes set the pace of routine work: at least one worker,
	// at most --max-concurrent-reconciles.
	if n := gauge("promociones_routine_reconciles_limit", "-"); n < 1 || n > float64(testFlags().maxConcurrentReconciles) {
		t.Errorf("promociones_routine_reconciles_limit %v, want 1 to %d", n, testFlags().maxConcurrentReconciles)
	}

	listos, observed := gauge("promociones", FaseListo), timeToListoCount(t)
	setDeploymentStatus(t, c.dep, 3)
	eventually(t, "Listo, counted and timed", func() error {
		if n := gauge("promociones", FaseListo); n != listos+1 {
			return fmt.Errorf("promociones{fase=Listo} %v, want %v", n, listos+1)
		}
		if n := timeToListoCount(t); n != observed+1 {
			return fmt.Errorf("%d observations of promociones_time_to_listo_seconds, want %d", n, observed+1)
		}
		return nil
	})

	drift := testutil.ToFloat64(driftCorrections.WithLabelValues("ConfigMap"))
	if err := k8sClient.Delete(ctx, c.cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted ConfigMap put back, and counted as drift", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(c.cm), &corev1.ConfigMap{}); err != nil {
			return err
		}
		if n := testutil.ToFloat64(driftCorrections.WithLabelValues("ConfigMap")); n != drift+1 {
			return fmt.Errorf("promociones_drift_corrections_total{kind=ConfigMap} %v, want %v", n, drift+1)
		}
		return nil
	})

	// A child of the same name controlled by someone else: an apply error.
	owned := testutil.ToFloat64(applyErrors.WithLabelValues("ConfigMap", "ChildOwnedByOther"))
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "otra-html"}}
	createForeignChild(t, p.Namespace, theirs)
	createPromocion(t, p.Namespace, "otra", "Otra", 1)
	eventually(t, "the refusal counted", func() error {
		if n := testutil.ToFloat64(applyErrors.WithLabelValues("ConfigMap", "ChildOwnedByOther")); n <= owned {
			return fmt.Errorf("promociones_apply_errors_total{kind=ConfigMap,reason=ChildOwnedByOther} %v", n)
		}
		return nil
	})
}
