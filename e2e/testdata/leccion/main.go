package main

import (
	"net/http"
	_ "net/http/pprof" // for the benchmark's heap profiles, served only when it asks (LECCION_PPROF)
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

type PromocionReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

func (r *PromocionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&Promocion{}).          // the object we govern
		Owns(&appsv1.Deployment{}). // ...and the ones that belong to it
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Named("promocion").
		Complete(r)
}

// main is not shown in the lesson beyond its NewManager line and its first
// log line; this is the least that starts it.
func main() {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	log := ctrl.Log.WithName("setup")
	log.Info("operador-promociones arrancando")
	if addr := os.Getenv("LECCION_PPROF"); addr != "" {
		// Not the lesson's: the benchmark's way to take the same heap profile
		// of it as of ours (on the address it gives, loopback).
		go func() { log.Error(http.ListenAndServe(addr, nil), "pprof") }()
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		log.Error(err, "scheme")
		os.Exit(1)
	}
	if err := AddToScheme(scheme); err != nil {
		log.Error(err, "scheme")
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Scheme: scheme})
	if err != nil {
		log.Error(err, "manager")
		os.Exit(1)
	}
	if err := (&PromocionReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}).SetupWithManager(mgr); err != nil {
		log.Error(err, "controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager")
		os.Exit(1)
	}
}
