// operador-promociones makes, for every Promocion, a ConfigMap holding a page
// with its banner, a Deployment of a web server serving it, and a Service in
// front, and reports in the Promocion's status how the rollout is going.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
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
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// PromocionReconciler brings a Promocion's children to what its spec asks for.
type PromocionReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	WebImage string
}

func (r *PromocionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var promo Promocion
	if err := r.Get(ctx, req.NamespacedName, &promo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !promo.DeletionTimestamp.IsZero() {
		// The garbage collector is removing the children; recreating them would fight it.
		return ctrl.Result{}, nil
	}

	dep, err := r.applyChildren(ctx, &promo)
	if !apierrors.IsConflict(err) {
		// The status reports what happened, failures included.
		status := computeStatus(&promo, dep, err, metav1.Now())
		err = errors.Join(err, r.updateStatus(ctx, &promo, status))
	}
	if apierrors.IsConflict(err) {
		// The cache was behind the API server. The watch event bringing the newer
		// version queues this Promocion again: routine, so not logged as an error.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, err
}

// applyChildren makes the ConfigMap, the Deployment and the Service what the
// Promocion asks for. It tries all three even when one fails, and returns the
// Deployment only if it is the Promocion's own.
func (r *PromocionReconciler) applyChildren(ctx context.Context, promo *Promocion) (*appsv1.Deployment, error) {
	cm := &corev1.ConfigMap{ObjectMeta: childMeta(promo, ConfigMapName(promo))}
	dep := &appsv1.Deployment{ObjectMeta: childMeta(promo, promo.Name)}
	svc := &corev1.Service{ObjectMeta: childMeta(promo, promo.Name)}

	cmErr := r.apply(ctx, promo, cm, func() { mutateConfigMap(cm, promo) })
	depErr := r.apply(ctx, promo, dep, func() { mutateDeployment(dep, promo, r.WebImage) })
	svcErr := r.apply(ctx, promo, svc, func() { mutateService(svc, promo) })
	if depErr != nil {
		dep = nil
	}
	return dep, errors.Join(cmErr, depErr, svcErr)
}

func childMeta(promo *Promocion, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: promo.Namespace}
}

// apply is CreateOrUpdate with the Promocion as the child's controller. A child
// controlled by something else makes SetControllerReference fail before any write.
func (r *PromocionReconciler) apply(ctx context.Context, promo *Promocion, child client.Object, mutate func()) error {
	gvk, err := apiutil.GVKForObject(child, r.Scheme)
	if err != nil {
		return err
	}
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, child, func() error {
		if err := controllerutil.SetControllerReference(promo, child, r.Scheme); err != nil {
			return err
		}
		mutate()
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, child.GetName(), err)
	}
	if op != controllerutil.OperationResultNone {
		log.FromContext(ctx).Info("Applied child", "kind", gvk.Kind, "child", child.GetName(), "operation", op)
	}
	return nil
}

// updateStatus writes the status subresource, and only when it changed.
func (r *PromocionReconciler) updateStatus(ctx context.Context, promo *Promocion, status PromocionStatus) error {
	if equality.Semantic.DeepEqual(promo.Status, status) {
		return nil
	}
	promo.Status = status
	if err := r.Status().Update(ctx, promo); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// SetupWithManager watches Promociones, and the children they own: a change to
// any child queues its Promocion.
func (r *PromocionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&Promocion{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Named("promocion").
		Complete(r)
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(AddToScheme(s))
	return s
}

// run starts the operator and blocks until ctx is cancelled or the manager fails.
func run(ctx context.Context, cfg *rest.Config, opts ctrl.Options, webImage string) error {
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	r := &PromocionReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), WebImage: webImage}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	return mgr.Start(ctx)
}

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
	var (
		metricsAddr string
		webImage    string
		verbosity   int
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint listens on; \"0\" turns it off.")
	flag.StringVar(&webImage, "web-image", DefaultWebImage, "Image of the web server in each Promocion's Deployment. It must serve "+htmlDir+" on port 8080.")
	flag.IntVar(&verbosity, "v", 0, "Log verbosity: 1 adds detail about each reconcile.")
	flag.Parse()

	logger, err := newLogger(verbosity)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go logs through klog; send it to the same place
	logger.Info("operador-promociones arrancando")

	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:  newScheme(),
		Metrics: metricsserver.Options{BindAddress: metricsAddr},
	}, webImage); err != nil {
		logger.Error(err, "Operator stopped")
		os.Exit(1)
	}
}
