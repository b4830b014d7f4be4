// operador-promociones makes, for every Promocion, a ConfigMap holding a page
// with its banner, a Deployment of a web server serving it, and a Service in
// front, and reports in the Promocion's status how the rollout is going.
//
// The lesson's main.go is here in three files: Reconcile and SetupWithManager
// are in reconciler.go, the flags in flags.go, and this file starts the
// operator: main, run (the lesson's ctrl.NewManager) and the logger. What each
// child holds, and what the status says, is in children.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// operatorName names the operator wherever it shows: its labels on the
// children, its field manager and user agent, its events and its Lease.
const operatorName = "operador-promociones"

// newScheme registers Kubernetes' own types and Promocion (types.go).
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(AddToScheme(s))
	return s
}

// run starts the operator and blocks until ctx is cancelled or the manager fails.
func run(ctx context.Context, cfg *rest.Config, opts ctrl.Options, webImage string, w workers) error {
	// The user agent names the field manager in the children's managedFields
	// and the user agent in the audit log: the operator's name, whatever the
	// binary is called (go run, a test binary).
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = operatorName
	// With leader election, the operator's writes (children, status, events)
	// pass the fence (fence.go); without it, fence is nil and lets them all through.
	var fence *leaderFence
	if opts.LeaderElection {
		fence = &leaderFence{holdFor: *opts.RenewDeadline, grace: (*opts.LeaseDuration - *opts.RenewDeadline) / 2}
	}
	recorder, stopEvents, err := startEvents(ctx, fence.fence(cfg), opts.Scheme)
	if err != nil {
		return err
	}
	defer stopEvents()
	if opts.LeaderElection {
		lock, err := newLeaderLock(cfg, opts.LeaderElectionNamespace, opts.LeaderElectionID, *opts.RenewDeadline, fence, recorder)
		if err != nil {
			return err
		}
		opts.LeaderElectionResourceLockInterface = lock
	}
	// Routine reconciles follow how fast the API server answers their writes.
	var paced *pace
	if w.adaptive {
		paced = newPace(max(opts.Controller.MaxConcurrentReconciles, 1))
	}
	opts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
		cfg = paced.timed(fence.fence(cfg))
		var err error
		if o.HTTPClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, err
		}
		return client.New(cfg, o)
	}

	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	r := &PromocionReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    mgr.GetScheme(),
		Recorder:  recorder,
		WebImage:  webImage,

		RepairWorkers: w.repairs,
		Pace:          paced,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	if err := mgr.Add(fases{reader: mgr.GetCache()}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the caches are filled: before that, the operator knows nothing.
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// startEvents starts an events broadcaster of the operator's own rather than
// using the manager's, whose shutdown cancels the writes still in flight and
// logs each as an error. These are never cancelled: at worst the process
// exits under them. They reach the API server one at a time (oneAtATime).
func startEvents(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (events.EventRecorder, func(), error) {
	clientset, err := kubernetes.NewForConfig(oneAtATime(cfg))
	if err != nil {
		return nil, nil, fmt.Errorf("creating the events client: %w", err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: clientset.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(context.WithoutCancel(ctx)); err != nil {
		return nil, nil, fmt.Errorf("starting the events broadcaster: %w", err)
	}
	return broadcaster.NewRecorder(scheme, operatorName), broadcaster.Shutdown, nil
}

// oneAtATime makes the writes made with cfg go one at a time, each after the
// one before is answered. client-go's events broadcaster sends every Event
// from a goroutine of its own, so while the API server is slow they pile up
// in flight beside the paced reconciles, unpaced, and take a saturated API
// server's CPU from people and other controllers (BENCHMARKS.md, contention).
// Events can wait; client-go's older broadcaster sent them one at a time too.
func oneAtATime(cfg *rest.Config) *rest.Config {
	turn := make(chan struct{}, 1)
	return onWrites(cfg, func(r *http.Request, next http.RoundTripper) (*http.Response, error) {
		select {
		case turn <- struct{}{}:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
		defer func() { <-turn }()
		return next.RoundTrip(r)
	})
}

// memoryLimit is the Go runtime's memory limit for a container whose limit
// deploy.yaml passes in CONTAINER_MEMORY_LIMIT (bytes, from the downward API):
// nine tenths of it, less binaryPages, the rest left for what the runtime does
// not count. With it the garbage collector works harder as the heap nears the
// limit, instead of letting it grow to twice what is live and the container
// be OOM-killed. Never less than half the container's limit: below that the
// collector would run without end. 0: leave the runtime as it is (no such
// variable, or GOMEMLIMIT set, which wins).
func memoryLimit(getenv func(string) string) (int64, error) {
	v := getenv("CONTAINER_MEMORY_LIMIT")
	if v == "" || getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("CONTAINER_MEMORY_LIMIT=%q: want the container's memory limit in bytes (resourceFieldRef limits.memory)", v)
	}
	return max(n-n/10-binaryPages, n/2), nil
}

// binaryPages is room for the operator's binary in the container's memory:
// its pages mapped from its file are in its RSS (29 MiB measured, BENCHMARKS.md)
// and in the container's usage, and the Go runtime's limit does not count
// them. With nine tenths alone, at 10,000 Promociones the RSS passed a 256Mi limit.
const binaryPages = 32 << 20

// newLogger writes human-readable lines ("INFO  message  {"key": "value"}");
// verbosity n shows logr's V(n) detail.
func newLogger(verbosity int) (logr.Logger, error) {
	cfg := zap.NewDevelopmentConfig()
	cfg.Development = false
	cfg.DisableStacktrace = true
	cfg.Level = zap.NewAtomicLevelAt(zapcore.Level(-verbosity))
	zl, err := cfg.Build()
	if err != nil {
		return logr.Discard(), err
	}
	return zapr.NewLogger(zl), nil
}

func main() {
	var c flags
	c.bind(flag.CommandLine)
	flag.Parse()
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	memLimit, err := memoryLimit(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	logger, err := newLogger(c.verbosity)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go logs through klog; send it to the same place
	logger.Info("operador-promociones arrancando")
	if memLimit > 0 {
		debug.SetMemoryLimit(memLimit)
		logger.Info("Go memory limit set from the container's", "GOMEMLIMIT", memLimit)
	}

	if err := run(ctrl.SetupSignalHandler(), c.restConfig(ctrl.GetConfigOrDie()), c.managerOptions(), c.webImage, c.workers); err != nil {
		logger.Error(err, "Operator stopped")
		os.Exit(1)
	}
	logger.Info("Operator stopped")
}
