package main

// The command line: the flags, their checks, and the manager's options they
// make. docs/flags.md lists them.

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// flags is what the command line sets.
type flags struct {
	metricsAddr, probeAddr  string
	metricsSecure           bool
	metricsCertDir          string
	pprof                   bool
	leaderElect             bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	namespaces              stringList
	maxConcurrentReconciles int
	workers                 workers
	qps                     float64
	burst                   int
	warmup                  bool
	webImage                string
	verbosity               int
}

func (c *flags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint, /metrics over HTTP/1.1; \"0\" turns it off.")
	fs.BoolVar(&c.metricsSecure, "metrics-secure", true, "Serve /metrics over HTTPS to clients whose token the API server authenticates and authorizes to get /metrics; false serves plain HTTP to anyone.")
	fs.StringVar(&c.metricsCertDir, "metrics-cert-dir", "", "Directory holding tls.crt and tls.key for the metrics endpoint (a cert-manager Certificate's Secret, mounted); empty: a self-signed certificate made at start-up.")
	fs.BoolVar(&c.pprof, "pprof", false, "Serve Go's profiles (heap, CPU, goroutines) under /debug/pprof/ on the metrics endpoint, to clients authorized to get that non-resource URL, as /metrics is; needs --metrics-secure.")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz probes; \"0\" turns them off.")
	fs.BoolVar(&c.leaderElect, "leader-elect", false, "Elect a leader through the Lease "+operatorName+", so that of several replicas only one reconciles.")
	fs.StringVar(&c.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the Lease. In a Pod it defaults to the Pod's namespace; out of the cluster it must be set.")
	fs.DurationVar(&c.leaseDuration, "leader-elect-lease-duration", 30*time.Second, "How long a standby waits, after the leader's last renewal, before taking the Lease over.")
	fs.DurationVar(&c.renewDeadline, "leader-elect-renew-deadline", 20*time.Second, "How long the leader keeps trying to renew (through an API server stall, say) before it gives up and exits.")
	fs.DurationVar(&c.retryPeriod, "leader-elect-retry-period", 4*time.Second, "How often leader and standbys try to renew or acquire the Lease.")
	fs.IntVar(&c.maxConcurrentReconciles, "max-concurrent-reconciles", 16, "How many Promociones are reconciled at once, repairs aside; BENCHMARKS.md measured 1, 4, 16 and 32.")
	fs.BoolVar(&c.workers.adaptive, "adaptive-concurrency", true, "Run fewer routine reconciles at once, down to one, while the API server answers the operator's writes more than twice as slowly as at its quietest, and up to --max-concurrent-reconciles while it keeps up (BENCHMARKS.md measured both).")
	fs.IntVar(&c.workers.repairs, "max-concurrent-repairs", 32, "Workers kept for Promociones whose child was deleted, beside --max-concurrent-reconciles: idle until a repair is queued (BENCHMARKS.md measured the repairs under load).")
	fs.Float64Var(&c.qps, "kube-api-qps", -1, "Requests per second to the API server, client-side; -1: no client-side limit, API Priority and Fairness arbitrates (BENCHMARKS.md measured the choice).")
	fs.IntVar(&c.burst, "kube-api-burst", 0, "Requests above --kube-api-qps allowed in a burst (with a --kube-api-qps above 0).")
	fs.BoolVar(&c.warmup, "leader-elect-warmup", false, "A standby fills its cache before it leads, so that a failover starts reconciling sooner (BENCHMARKS.md measured it). Off by default: a replica that cannot fill its cache (no RBAC yet) then exits after 2 minutes instead of waiting for the Lease.")
	fs.Var(&c.namespaces, "namespace", "Watch only this namespace; repeat it for several. Without it, every namespace.")
	fs.StringVar(&c.webImage, "web-image", DefaultWebImage, "Image of the web server in each Promocion's Deployment. It must serve "+htmlDir+" on port 8080 as a non-root user.")
	fs.IntVar(&c.verbosity, "v", 0, "Log verbosity: 1 adds detail about each reconcile.")
}

// workers says how the controller's workers are shared out (queue.go).
type workers struct {
	repairs  int  // kept for repairs, beside the manager's MaxConcurrentReconciles for routine work
	adaptive bool // routine work paced to the API server's answers
}

// gracefulShutdown is how long the manager waits, on SIGTERM, for reconciles in
// flight and for the Lease to be released. deploy.yaml's
// terminationGracePeriodSeconds is longer.
const gracefulShutdown = 20 * time.Second

// minWriteTime is the least time the leader fence gives a write to finish:
// half of LeaseDuration - RenewDeadline (fence.go).
const minWriteTime = time.Second

// validate checks what the flags' types cannot: the leader election timings
// that client-go and the fence rely on.
func (c *flags) validate() error {
	if c.metricsCertDir != "" {
		// controller-runtime falls back to a self-signed certificate when the
		// files are missing: a typo would go unnoticed.
		for _, f := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Stat(filepath.Join(c.metricsCertDir, f)); err != nil {
				return fmt.Errorf("--metrics-cert-dir: %w", err)
			}
		}
		if !c.metricsSecure {
			return errors.New("--metrics-cert-dir is for --metrics-secure, which is off")
		}
	}
	// A profile shows the process's memory, and the Promociones in it: only
	// behind the metrics authorization, never in plain HTTP to anyone.
	switch {
	case c.pprof && !c.metricsSecure:
		return errors.New("--pprof is served behind --metrics-secure's authorization, which is off")
	case c.pprof && c.metricsAddr == "0":
		return errors.New("--pprof is served on the metrics endpoint, which --metrics-bind-address=0 turns off")
	}
	if c.maxConcurrentReconciles < 1 || c.workers.repairs < 0 {
		return errors.New("--max-concurrent-reconciles must be 1 or more, and --max-concurrent-repairs 0 or more")
	}
	if c.qps != -1 && (c.qps <= 0 || c.burst < 1) {
		return errors.New("--kube-api-qps must be -1 (no client-side limit) or above 0 with a --kube-api-burst of 1 or more")
	}
	if !c.leaderElect {
		return nil
	}
	switch {
	case c.retryPeriod <= 0 || c.renewDeadline <= 0 || c.leaseDuration <= 0:
		return errors.New("--leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period must be positive")
	case float64(c.renewDeadline) <= leaderelection.JitterFactor*float64(c.retryPeriod):
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be longer than %.1f × --leader-elect-retry-period (%s): "+
			"the leader must get to try again before it gives up", c.renewDeadline, leaderelection.JitterFactor, c.retryPeriod)
	case c.leaseDuration-c.renewDeadline < 2*minWriteTime:
		return fmt.Errorf("--leader-elect-lease-duration (%s) must be at least %s longer than --leader-elect-renew-deadline (%s): "+
			"a deposed leader's last write must be done before a standby may lead, and each write needs %s at least",
			c.leaseDuration, 2*minWriteTime, c.renewDeadline, minWriteTime)
	}
	return nil
}

// restConfig sets the client-side limit on cfg: by default none, as
// controller-runtime leaves it, for API Priority and Fairness to arbitrate.
func (c *flags) restConfig(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = float32(c.qps), c.burst
	return cfg
}

func (c *flags) managerOptions() ctrl.Options {
	var namespaces map[string]cache.Config
	for _, ns := range c.namespaces {
		if namespaces == nil {
			namespaces = map[string]cache.Config{}
		}
		namespaces[ns] = cache.Config{}
	}
	return ctrl.Options{
		Scheme:                 newScheme(),
		Controller:             config.Controller{MaxConcurrentReconciles: c.maxConcurrentReconciles, EnableWarmup: &c.warmup},
		Metrics:                c.metricsOptions(),
		HealthProbeBindAddress: c.probeAddr,
		Client: client.Options{Cache: &client.CacheOptions{
			// A reconcile that follows the operator's own write waits (a few ms)
			// for the cache to hold it, instead of acting on the older copy and
			// paying a failed create or a conflict for it. Experimental in
			// controller-runtime, and wrong with several namespaces, so off then.
			EnableReadYourWritesConsistency: new(len(c.namespaces) <= 1),
		}},
		Cache: cache.Options{
			DefaultNamespaces: namespaces,
			DefaultTransform:  newCacheTransform(),
			ByObject:          cacheByObject(),
		},
		LeaderElection:                c.leaderElect,
		LeaderElectionID:              operatorName,
		LeaderElectionNamespace:       c.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true, // safe: main exits as soon as the manager returns
		LeaseDuration:                 &c.leaseDuration,
		RenewDeadline:                 &c.renewDeadline,
		RetryPeriod:                   &c.retryPeriod,
		GracefulShutdownTimeout:       new(gracefulShutdown),
	}
}

// metricsOptions serves /metrics as kubebuilder's scaffold does: over HTTPS,
// to a client whose bearer token the API server authenticates (TokenReview)
// and authorizes to get the non-resource URL /metrics (SubjectAccessReview).
func (c *flags) metricsOptions() metricsserver.Options {
	o := metricsserver.Options{
		BindAddress:   c.metricsAddr,
		SecureServing: c.metricsSecure,
		// HTTP/1.1 only: HTTP/2's stream handling has had denial-of-service
		// flaws (CVE-2023-44487, CVE-2023-39325), and a scraper needs none of it.
		TLSOpts: []func(*tls.Config){func(t *tls.Config) { t.NextProtos = []string{"http/1.1"} }},
	}
	if c.metricsSecure {
		o.FilterProvider = metricsAuth // metricsauth.go, around the extra handlers too
		o.CertDir = c.metricsCertDir
	}
	if c.pprof {
		// The handlers of net/http/pprof, on the metrics server's own mux. (Its
		// import also registers them on http.DefaultServeMux, which nothing in
		// the operator serves.)
		o.ExtraHandlers = map[string]http.Handler{
			"/debug/pprof/":        http.HandlerFunc(pprof.Index), // and every profile by name: heap, goroutine, allocs...
			"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		}
	}
	return o
}

// stringList is a flag that may be repeated.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
