package main

// Metrics about the Promociones, beside controller-runtime's about the
// operator. Every label has a bounded set of values (a fase, a child's kind,
// an API status reason), never a Promocion's name: 10,000 Promociones cost the
// same series as one. docs/operating.md lists them with the alerts on them.

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	applyErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "promociones_apply_errors_total",
		Help: "Failed creates or updates of a Promocion's child, by the child's kind and the reason: the API server's (Forbidden, Invalid...), ChildExists, ChildOwnedByOther, or ApplyFailed when there was no answer. Conflicts, retried as routine, are not counted.",
	}, []string{"kind", "reason"})
	driftCorrections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "promociones_drift_corrections_total",
		Help: "Children that someone else changed or deleted and the operator put back: a child created or updated while its Promocion's spec was unchanged since its last status.",
	}, []string{"kind"})
	timeToListo = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "promociones_time_to_listo_seconds",
		Help:    "How long a Promocion was Desplegando before it was Listo: from when the operator started rolling out its spec to when every pod ran it and was ready.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1 s to about an hour
	})
	routineLimit = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "promociones_routine_reconciles_limit",
		Help: "How many routine reconciles may run at once (repairs aside): --max-concurrent-reconciles while the API server answers the operator's writes quickly, fewer while it is slow.",
	})
)

func init() {
	metrics.Registry.MustRegister(applyErrors, driftCorrections, timeToListo, routineLimit)
	// The API server's latency as the operator sees it, by verb, as
	// Kubernetes' own controllers report it (controller-runtime leaves it
	// off): what a slow or crowded control plane costs each reconcile.
	metrics.RegisterRESTClientMetrics(metrics.MetricRequestLatency)
}

// countApplyError counts a refused write of a child of kind.
func countApplyError(kind string, err error) {
	reason := string(apierrors.ReasonForError(err))
	if reason == "" { // not the API server's refusal
		reason, _ = explainApplyError(err) // ChildExists, ChildOwnedByOther, or ApplyFailed
	}
	applyErrors.WithLabelValues(kind, reason).Inc()
}

// isDrift says whether writing a child of p now puts back what someone else
// changed, rather than following a change of p's spec.
func isDrift(p *Promocion) bool {
	return p.Status.ObservedGeneration > 0 && p.Status.ObservedGeneration == p.Generation
}

// observeListo records how long a Promocion was Desplegando, when its status
// goes from before to after, Listo.
func observeListo(before, after PromocionStatus, now time.Time) {
	if before.Fase == FaseListo || after.Fase != FaseListo {
		return
	}
	if c := meta.FindStatusCondition(before.Conditions, ConditionProgressing); c != nil && c.Status == metav1.ConditionTrue {
		timeToListo.Observe(now.Sub(c.LastTransitionTime.Time).Seconds())
	}
}

// fases reports, at each scrape, how many Promociones the cache holds in each
// fase, and how long the oldest of those not Listo has been so.
type fases struct{ reader client.Reader }

var (
	fasesDesc = prometheus.NewDesc("promociones", "Promociones by status.fase (\"\" for one the operator has not reconciled yet), as the operator's cache holds them.", []string{"fase"}, nil)
	notListo  = prometheus.NewDesc("promociones_not_listo_oldest_seconds", "How long the Promocion that has been not Listo the longest has been so (its Ready condition's last transition); 0 when all are Listo.", nil, nil)
)

func (f fases) Describe(ch chan<- *prometheus.Desc) { ch <- fasesDesc; ch <- notListo }

func (f fases) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list PromocionList
	// The cache's own objects, not copies: this only reads them, and a copy of
	// every Promocion at each scrape is garbage the size of the cache.
	if err := f.reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(fasesDesc, err) // the scrape shows the error
		return
	}
	counts := map[string]float64{FaseDesplegando: 0, FaseListo: 0}
	var oldest time.Duration
	for _, p := range list.Items {
		counts[p.Status.Fase]++
		if c := meta.FindStatusCondition(p.Status.Conditions, ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
			oldest = max(oldest, time.Since(c.LastTransitionTime.Time))
		}
	}
	for fase, n := range counts {
		ch <- prometheus.MustNewConstMetric(fasesDesc, prometheus.GaugeValue, n, fase)
	}
	ch <- prometheus.MustNewConstMetric(notListo, prometheus.GaugeValue, oldest.Seconds())
}

// Start registers the collector for as long as the manager runs. Every
// replica reports, from its own cache: a standby's holds the same Promociones.
func (f fases) Start(ctx context.Context) error {
	err := metrics.Registry.Register(f)
	if err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return err
	}
	<-ctx.Done()
	if err == nil { // not the collector of another manager in this process (tests run several)
		metrics.Registry.Unregister(f)
	}
	return nil
}

func (f fases) NeedLeaderElection() bool { return false }
