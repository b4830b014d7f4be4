package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
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
	// RepairWorkers reconcile only repairs, beside the manager's
	// MaxConcurrentReconciles workers for routine work (repairLane, queue.go).
	RepairWorkers int
	// Pace, if set, sets how many routine reconciles run at once (queue.go).
	Pace *pace

	own ownStatusWrites // status_writes.go
}

// Reconcile is called with the name of a Promocion that needs attention, and
// finds out for itself how the world looks: it makes each child what the
// Promocion asks for (childKinds, in children.go), then writes in the status
// how the rollout goes, once, and only if that changed. A Promocion that is
// gone or going is left to the garbage collector.
func (r *PromocionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reconcileTimeout)
	defer cancel()

	var promo Promocion
	if err := r.Get(ctx, req.NamespacedName, &promo); err != nil {
		if apierrors.IsNotFound(err) {
			// The lesson's Step 9: the Promocion was deleted, and its children
			// go with it, by their ownerReferences, without a Delete from here.
			log.FromContext(ctx).Info("Promocion gone: the garbage collector removes its children")
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !promo.DeletionTimestamp.IsZero() {
		// The garbage collector is removing the children; recreating them would fight it.
		return ctrl.Result{}, nil
	}

	defer log.FromContext(ctx).V(1).Info("Reconciled")
	dep, err := r.applyChildren(ctx, &promo)
	if some(err, namespaceGoing) {
		// The namespace is being deleted, and this Promocion with it, or is
		// gone. The API server refuses new children there, and they would
		// fight the deletion.
		return ctrl.Result{}, nil
	}
	if some(err, isPromocionGoing) {
		// The cache had not seen the deletion yet; its event brings the
		// Promocion back, gone or going.
		return ctrl.Result{}, nil
	}
	if !onlyConflicts(err) {
		// The status reports what happened, failures included.
		status := computeStatus(&promo, dep, err, metav1.Now())
		err = errors.Join(err, r.updateStatus(ctx, &promo, status))
	}
	if onlyConflicts(err) {
		// The cache was behind the API server (or behind the operator's own
		// status write: status_writes.go). A second from now it has caught
		// up: routine, so not logged as an error.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, err
}

// reconcileTimeout bounds one reconcile. A reconcile is not cut short when the
// manager stops, so that SIGTERM leaves no half-applied Promocion; this bounds
// how long it can hold the shutdown up.
const reconcileTimeout = 10 * time.Second

// SetupWithManager watches Promociones, and the children they own: a change to
// any child queues its Promocion. Each child's watch is the lesson's Owns (the
// same handler, EnqueueRequestForOwner of the controller owner), wrapped so
// that a deleted child's Promocion goes ahead of the queue, to workers kept
// for repairs.
func (r *PromocionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	owns := repairFirst{handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &Promocion{}, handler.OnlyControllerOwner()), mgr.GetCache()}
	routine := max(mgr.GetControllerOptions().MaxConcurrentReconciles, 1)
	b := ctrl.NewControllerManagedBy(mgr).For(&Promocion{}, builder.WithPredicates(r.own.promocionChanged())).WithOptions(controller.Options{
		MaxConcurrentReconciles: routine + r.RepairWorkers,
		RateLimiter:             retries(),
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			lane := newRepairLane(priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
				o.RateLimiter, o.Log = rl, mgr.GetLogger().WithValues("controller", name)
			}), routine)
			if r.Pace != nil {
				r.Pace.follow(lane)
			}
			return lane
		},
	})
	for _, k := range childKinds {
		b = b.Watches(k.New(), owns)
	}
	return b.Named("promocion").Complete(r)
}

// applyChildren makes every child what the Promocion asks for, and tells what
// it changed in one Event. It tries them all even when one fails, unless the
// Promocion turns out to be gone or going, and returns the Deployment only if
// it is the Promocion's own.
func (r *PromocionReconciler) applyChildren(ctx context.Context, promo *Promocion) (*appsv1.Deployment, error) {
	var changes []childChange
	var related runtime.Object
	var dep *appsv1.Deployment
	var errs []error
	for _, k := range childKinds {
		child, change, err := r.applyChild(ctx, promo, k)
		if isPromocionGoing(err) {
			return nil, err // the cache was behind; the others would find the same
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if change != nil {
			changes = append(changes, *change)
			related = child
		}
		if d, ok := child.(*appsv1.Deployment); ok {
			dep = d
		}
	}
	if len(changes) > 0 {
		if len(changes) > 1 {
			related = nil // the note names them all
		}
		reason, note := describeChanges(changes)
		log.FromContext(ctx).Info("Changed children", "reason", reason, "note", note)
		r.Recorder.Eventf(promo, related, corev1.EventTypeNormal, reason, "Apply", "%s", note)
	}
	return dep, errors.Join(errs...)
}

// applyChild is CreateOrUpdate of one child, with the Promocion as its
// controller. It returns what it changed, if anything; a failure is also a
// Warning Event. An object of the child's name that is not the Promocion's to
// write (claim, in children.go) fails the mutate function, before any write.
func (r *PromocionReconciler) applyChild(ctx context.Context, promo *Promocion, k childKind) (client.Object, *childChange, error) {
	name := k.Name(promo)
	createOrUpdate := func(c client.Client, cached bool) (client.Object, controllerutil.OperationResult, error) {
		child := k.New()
		child.SetName(name)
		child.SetNamespace(promo.Namespace)
		op, err := controllerutil.CreateOrUpdate(ctx, c, child, func() error {
			if err := claim(child, k.Kind, promo); err != nil {
				return err
			}
			if cached && child.GetUID() != "" && !cachedWhole(child) {
				return errStub
			}
			if needsLiveOwner(child, promo) {
				if err := r.stillLive(ctx, promo); err != nil {
					return err
				}
			}
			if err := controllerutil.SetControllerReference(promo, child, r.Scheme); err != nil {
				return err
			}
			k.Mutate(child, promo, r.WebImage)
			return nil
		})
		return child, op, err
	}
	child, op, err := createOrUpdate(r.Client, true)
	if apierrors.IsAlreadyExists(err) || errors.Is(err, errStub) {
		// It exists but the cache cannot see it (it lacks the operator's
		// labels: removed by hand, or never the operator's), or holds only a
		// stub of it (an orphan to take back): read it whole.
		child, op, err = createOrUpdate(directReads{r.Client, r.APIReader}, false)
	}

	switch {
	case apierrors.IsConflict(err), isPromocionGoing(err):
		return nil, nil, err // routine: Reconcile requeues, or stops, without an event if nothing else failed
	case err != nil:
		countApplyError(k.Kind, err)
		err = fmt.Errorf("%s %s: %w", k.Kind, name, err)
		if !namespaceGoing(err) { // an Event there would be refused too
			reason, msg := explainApplyError(err)
			r.Recorder.Eventf(promo, child, corev1.EventTypeWarning, reason, "Apply", "%s", msg)
		}
		return nil, nil, err
	case op == controllerutil.OperationResultNone:
		return child, nil, nil
	case isDrift(promo):
		driftCorrections.WithLabelValues(k.Kind).Inc()
	}
	return child, &childChange{Created: op == controllerutil.OperationResultCreated, Kind: k.Kind, Name: name}, nil
}

// stillLive reads the Promocion from the API server, past the cache, before
// a write that would be wrong for a Promocion that is gone or going
// (needsLiveOwner, in children.go). Such writes are repairs and take-backs, so
// the read costs nothing for new Promociones or in the steady state.
func (r *PromocionReconciler) stillLive(ctx context.Context, promo *Promocion) error {
	var live Promocion
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(promo), &live)
	switch {
	case apierrors.IsNotFound(err), err == nil && (live.UID != promo.UID || !live.DeletionTimestamp.IsZero()):
		return errPromocionGoing
	case err != nil:
		return fmt.Errorf("reading the Promocion past the cache: %w", err)
	}
	return nil
}

// errStub stops a write from the cache's stub of an object (cache_transform.go).
var errStub = errors.New("the cache holds only a stub of it")

var errPromocionGoing = errors.New("the Promocion is gone or being deleted: nothing is made or taken back for it")

func isPromocionGoing(err error) bool { return errors.Is(err, errPromocionGoing) }

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
		if r.own.behind(promo) || r.cacheMoved(ctx, promo) {
			return statusUnseen(promo, errStatusUnseen) // the API server holds a later status of the operator's, maybe another
		}
		return nil
	}
	before := promo.Status // computeStatus built status on a copy: this one is untouched
	promo.Status = status
	r.own.writing(promo)
	err := r.Status().Update(ctx, promo)
	later := r.own.wrote(promo, err == nil)
	if err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	observeListo(before, status, time.Now())
	if later {
		return statusUnseen(promo, errStatusLater)
	}
	return nil
}

// cacheMoved tells whether the cache holds a later promo than this reconcile
// read. The watch may have brought the operator's own last status write
// since then: it is dropped as the operator's (status_writes.go), and behind
// finds nothing pending, though promo is older than that write. The cache
// holds the write before the watch's handlers run, so a read after behind
// sees it (chaos, lagging-own-status: a Promocion Desplegando for good).
func (r *PromocionReconciler) cacheMoved(ctx context.Context, promo *Promocion) bool {
	var now Promocion
	err := r.Get(ctx, client.ObjectKeyFromObject(promo), &now)
	return err == nil && now.ResourceVersion != promo.ResourceVersion
}

// maxRetryDelay is the longest a failed reconcile waits to run again.
// controller-runtime's default waits up to 1000 s: a Promocion blocked by an
// object of a child's name that is not its own (claim) fails again on every
// event of its other children, and the few seconds of a Deployment's pods
// coming up double the wait past ten minutes. The blocker's deletion, which
// the condition asks for, brings no event (the cache holds only the
// operator's labelled children), so the Promocion would wait that long.
const maxRetryDelay = 30 * time.Second

// retries is controller-runtime's default rate limiter with maxRetryDelay:
// each failure in a row doubles the wait from 5 ms, and at most ten retries
// a second (a burst of 100) run across all Promociones.
func retries() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// repairPriority is a repair's place in controller-runtime's priority queue:
// above new and changed Promociones (0) and resyncs (handler.LowPriority).
const repairPriority = 100

// repairFirst queues the owner of a deleted child at repairPriority: a live
// shop without its Service is an outage now, while a thousand new Promociones
// in the queue are only waiting. Other events keep their usual priority.
//
// A child deleted after its Promocion is the garbage collector at work, not
// damage: it queues nothing, so that deleting a thousand Promociones does not
// put three thousand repairs of nothing ahead of the live ones, and Step 9's
// line is logged once per Promocion.
type repairFirst struct {
	handler.EventHandler
	// The cache. It has nearly always seen the Promocion go before the
	// children that the garbage collector deletes after it; when it has not,
	// the Promocion is queued as before, and Reconcile, about to make a child
	// anew, reads it past the cache and finds it gone or going (stillLive).
	promociones client.Reader
}

func (h repairFirst) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if owner := metav1.GetControllerOf(e.Object); owner != nil && owner.APIVersion == GroupVersion.String() && owner.Kind == "Promocion" {
		err := h.promociones.Get(ctx, client.ObjectKey{Namespace: e.Object.GetNamespace(), Name: owner.Name}, &Promocion{})
		if apierrors.IsNotFound(err) {
			return
		}
	}
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
