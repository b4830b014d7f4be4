// operador-promociones makes, for every Promocion, a ConfigMap holding a page
// with its banner, a Deployment of a web server serving it, and a Service in
// front, and reports in the Promocion's status how the rollout is going.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// PromocionReconciler brings a Promocion's children to what its spec asks for.
type PromocionReconciler struct {
	client.Client
	// APIReader reads straight from the API server. The cache holds only the
	// children the operator labelled; a child whose labels were removed by hand
	// is found through this.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	WebImage  string
}

// reconcileTimeout bounds one reconcile. A reconcile is not cut short when the
// manager stops, so that SIGTERM leaves no half-applied Promocion; this bounds
// how long it can hold the shutdown up.
const reconcileTimeout = 10 * time.Second

func (r *PromocionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reconcileTimeout)
	defer cancel()

	var promo Promocion
	if err := r.Get(ctx, req.NamespacedName, &promo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !promo.DeletionTimestamp.IsZero() {
		// The garbage collector is removing the children; recreating them would fight it.
		return ctrl.Result{}, nil
	}

	defer log.FromContext(ctx).V(1).Info("Reconciled")
	dep, err := r.applyChildren(ctx, &promo)
	if some(err, namespaceTerminating) {
		// The namespace is being deleted, and this Promocion with it. The API
		// server refuses new children there, and they would fight the deletion.
		return ctrl.Result{}, nil
	}
	if !onlyConflicts(err) {
		// The status reports what happened, failures included.
		status := computeStatus(&promo, dep, err, metav1.Now())
		err = errors.Join(err, r.updateStatus(ctx, &promo, status))
	}
	if onlyConflicts(err) {
		// The cache was behind the API server. The watch event bringing the newer
		// version queues this Promocion again: routine, so not logged as an error.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, err
}

// applyChildren makes the ConfigMap, the Deployment and the Service what the
// Promocion asks for, and tells what it changed in one Event. It tries all
// three even when one fails, and returns the Deployment only if it is the
// Promocion's own.
func (r *PromocionReconciler) applyChildren(ctx context.Context, promo *Promocion) (*appsv1.Deployment, error) {
	var changes []childChange
	var related runtime.Object
	changed := func(child client.Object, c *childChange) {
		if c != nil {
			changes = append(changes, *c)
			related = child
		}
	}
	cm, c, cmErr := applyChild(ctx, r, promo, ConfigMapName(promo), func(cm *corev1.ConfigMap) { mutateConfigMap(cm, promo) })
	changed(cm, c)
	dep, c, depErr := applyChild(ctx, r, promo, promo.Name, func(d *appsv1.Deployment) { mutateDeployment(d, promo, r.WebImage) })
	changed(dep, c)
	svc, c, svcErr := applyChild(ctx, r, promo, promo.Name, func(s *corev1.Service) { mutateService(s, promo) })
	changed(svc, c)

	if len(changes) > 0 {
		if len(changes) > 1 {
			related = nil // the note names them all
		}
		reason, note := describeChanges(changes)
		log.FromContext(ctx).Info("Changed children", "reason", reason, "note", note)
		r.Recorder.Eventf(promo, related, corev1.EventTypeNormal, reason, "Apply", "%s", note)
	}
	if depErr != nil {
		dep = nil
	}
	return dep, errors.Join(cmErr, depErr, svcErr)
}

// applyChild is CreateOrUpdate with the Promocion as the child's controller.
// It returns what it changed, if anything; a failure is also a Warning Event.
// An object of the child's name that is not the Promocion's to write (claim,
// in children.go) fails the mutate function, before any write.
func applyChild[T any, P interface {
	*T
	client.Object
}](ctx context.Context, r *PromocionReconciler, promo *Promocion, name string, mutate func(P)) (P, *childChange, error) {
	gvk, err := apiutil.GVKForObject(P(new(T)), r.Scheme)
	if err != nil {
		return nil, nil, err
	}
	createOrUpdate := func(c client.Client) (P, controllerutil.OperationResult, error) {
		child := P(new(T))
		child.SetName(name)
		child.SetNamespace(promo.Namespace)
		op, err := controllerutil.CreateOrUpdate(ctx, c, child, func() error {
			if err := claim(child, gvk.Kind, promo); err != nil {
				return err
			}
			if err := controllerutil.SetControllerReference(promo, child, r.Scheme); err != nil {
				return err
			}
			mutate(child)
			return nil
		})
		return child, op, err
	}
	child, op, err := createOrUpdate(r.Client)
	if apierrors.IsAlreadyExists(err) {
		// It exists but the cache cannot see it: it lacks the operator's
		// labels (removed by hand, or never the operator's).
		child, op, err = createOrUpdate(directReads{r.Client, r.APIReader})
	}

	switch {
	case apierrors.IsConflict(err):
		return nil, nil, err // routine: Reconcile requeues, without an event if nothing else failed
	case err != nil:
		countApplyError(gvk.Kind, err)
		err = fmt.Errorf("%s %s: %w", gvk.Kind, name, err)
		if !namespaceTerminating(err) { // an Event there would be refused too
			reason, msg := explainApplyError(err)
			r.Recorder.Eventf(promo, child, corev1.EventTypeWarning, reason, "Apply", msg)
		}
		return nil, nil, err
	case op == controllerutil.OperationResultNone:
		return child, nil, nil
	case isDrift(promo):
		driftCorrections.WithLabelValues(gvk.Kind).Inc()
	}
	return child, &childChange{Created: op == controllerutil.OperationResultCreated, Kind: gvk.Kind, Name: name}, nil
}

// directReads is a client whose reads skip the cache.
type directReads struct {
	client.Client
	reader client.Reader
}

func (d directReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return d.reader.Get(ctx, key, obj, opts...)
}

// updateStatus writes the status subresource, and only when it changed.
func (r *PromocionReconciler) updateStatus(ctx context.Context, promo *Promocion, status PromocionStatus) error {
	if equality.Semantic.DeepEqual(promo.Status, status) {
		return nil
	}
	before := promo.Status // computeStatus built status on a copy: this one is untouched
	promo.Status = status
	if err := r.Status().Update(ctx, promo); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	observeListo(before, status, time.Now())
	return nil
}

// SetupWithManager watches Promociones, and the children they own: a change to
// any child queues its Promocion. Each child's watch is the lesson's Owns (the
// same handler, EnqueueRequestForOwner of the controller owner), wrapped so
// that a deleted child's Promocion goes ahead of the queue.
func (r *PromocionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	owns := repairFirst{handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &Promocion{}, handler.OnlyControllerOwner())}
	return ctrl.NewControllerManagedBy(mgr).
		For(&Promocion{}).
		Watches(&appsv1.Deployment{}, owns).
		Watches(&corev1.Service{}, owns).
		Watches(&corev1.ConfigMap{}, owns).
		Named("promocion").
		Complete(r)
}

// repairPriority is a repair's place in controller-runtime's priority queue:
// above new and changed Promociones (0) and resyncs (handler.LowPriority).
const repairPriority = 100

// repairFirst queues the owner of a deleted child at repairPriority: a live
// shop without its Service is an outage now, while a thousand new Promociones
// in the queue are only waiting. Other events keep their usual priority.
type repairFirst struct{ handler.EventHandler }

func (h repairFirst) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		q = atPriority{pq, repairPriority}
	}
	h.EventHandler.Delete(ctx, e, q)
}

// atPriority is a priority queue whose Add puts items at one priority.
type atPriority struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	priority int
}

func (q atPriority) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &q.priority}, item)
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(AddToScheme(s))
	return s
}

// run starts the operator and blocks until ctx is cancelled or the manager fails.
func run(ctx context.Context, cfg *rest.Config, opts ctrl.Options, webImage string) error {
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
	clientset, err := kubernetes.NewForConfig(fence.fence(cfg))
	if err != nil {
		return fmt.Errorf("creating the events client: %w", err)
	}
	recorder, stopEvents, err := startEvents(ctx, clientset, opts.Scheme)
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
	opts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
		cfg = fence.fence(cfg)
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
// exits under them.
func startEvents(ctx context.Context, clientset kubernetes.Interface, scheme *runtime.Scheme) (events.EventRecorder, func(), error) {
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: clientset.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(context.WithoutCancel(ctx)); err != nil {
		return nil, nil, fmt.Errorf("starting the events broadcaster: %w", err)
	}
	return broadcaster.NewRecorder(scheme, operatorName), broadcaster.Shutdown, nil
}

// flags is what the command line sets.
type flags struct {
	metricsAddr, probeAddr  string
	metricsSecure           bool
	metricsCertDir          string
	leaderElect             bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	namespaces              stringList
	maxConcurrentReconciles int
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
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz probes; \"0\" turns them off.")
	fs.BoolVar(&c.leaderElect, "leader-elect", false, "Elect a leader through the Lease "+operatorName+", so that of several replicas only one reconciles.")
	fs.StringVar(&c.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the Lease. In a Pod it defaults to the Pod's namespace; out of the cluster it must be set.")
	fs.DurationVar(&c.leaseDuration, "leader-elect-lease-duration", 30*time.Second, "How long a standby waits, after the leader's last renewal, before taking the Lease over.")
	fs.DurationVar(&c.renewDeadline, "leader-elect-renew-deadline", 20*time.Second, "How long the leader keeps trying to renew (through an API server stall, say) before it gives up and exits.")
	fs.DurationVar(&c.retryPeriod, "leader-elect-retry-period", 4*time.Second, "How often leader and standbys try to renew or acquire the Lease.")
	fs.IntVar(&c.maxConcurrentReconciles, "max-concurrent-reconciles", 16, "How many Promociones are reconciled at once; BENCHMARKS.md measured 1, 4, 16 and 32.")
	fs.Float64Var(&c.qps, "kube-api-qps", -1, "Requests per second to the API server, client-side; -1: no client-side limit, API Priority and Fairness arbitrates (BENCHMARKS.md measured the choice).")
	fs.IntVar(&c.burst, "kube-api-burst", 0, "Requests above --kube-api-qps allowed in a burst (with a --kube-api-qps above 0).")
	fs.BoolVar(&c.warmup, "leader-elect-warmup", false, "A standby fills its cache before it leads, so that a failover starts reconciling sooner (BENCHMARKS.md measured it). Off by default: a replica that cannot fill its cache (no RBAC yet) then exits after 2 minutes instead of waiting for the Lease.")
	fs.Var(&c.namespaces, "namespace", "Watch only this namespace; repeat it for several. Without it, every namespace.")
	fs.StringVar(&c.webImage, "web-image", DefaultWebImage, "Image of the web server in each Promocion's Deployment. It must serve "+htmlDir+" on port 8080 as a non-root user.")
	fs.IntVar(&c.verbosity, "v", 0, "Log verbosity: 1 adds detail about each reconcile.")
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
			DefaultTransform:  cache.TransformStripManagedFields(),
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
		o.FilterProvider = metricsAuth // metricsauth.go
		o.CertDir = c.metricsCertDir
	}
	return o
}

// memoryLimit is the Go runtime's memory limit for a container whose limit
// deploy.yaml passes in CONTAINER_MEMORY_LIMIT (bytes, from the downward API):
// nine tenths of it, the rest left for what the runtime does not count (the
// binary's own pages). With it the garbage collector works harder as the heap
// nears the limit, instead of letting it grow to twice what is live and the
// container be OOM-killed. 0: leave the runtime as it is (no such variable, or
// GOMEMLIMIT set, which wins).
func memoryLimit(getenv func(string) string) (int64, error) {
	v := getenv("CONTAINER_MEMORY_LIMIT")
	if v == "" || getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("CONTAINER_MEMORY_LIMIT=%q: want the container's memory limit in bytes (resourceFieldRef limits.memory)", v)
	}
	return n - n/10, nil
}

// stringList is a flag that may be repeated.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

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

	if err := run(ctrl.SetupSignalHandler(), c.restConfig(ctrl.GetConfigOrDie()), c.managerOptions(), c.webImage); err != nil {
		logger.Error(err, "Operator stopped")
		os.Exit(1)
	}
	logger.Info("Operator stopped")
}
