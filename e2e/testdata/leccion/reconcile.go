//go:build !careful

package main

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Reconcile as the lesson writes it, in the simplest words: the "lesson"
// candidate. reconcile_careful.go is the same, written carefully.
func (r *PromocionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var promo Promocion
	if err := r.Get(ctx, req.NamespacedName, &promo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// "... create the ConfigMap, Deployment and Service ...": the lesson elides
	// these lines; they are filled the way it describes, one CreateOrUpdate
	// per child, each mutate function setting the desired state and
	// SetControllerReference, in the simplest words.
	replicas := int32(1)
	if promo.Spec.Replicas != nil {
		replicas = *promo.Spec.Replicas
	}
	labels := map[string]string{"app": promo.Name}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: promo.Name + "-html", Namespace: promo.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"index.html": "<html><body><h1>" + promo.Spec.Banner + "</h1></body></html>"}
		return controllerutil.SetControllerReference(&promo, cm, r.Scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}

	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: promo.Name, Namespace: promo.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		dep.Spec.Replicas = &replicas
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		dep.Spec.Template.Labels = labels
		dep.Spec.Template.Spec.Containers = []corev1.Container{{
			Name:         "web",
			Image:        "nginx:1.27",
			Ports:        []corev1.ContainerPort{{ContainerPort: 80}},
			VolumeMounts: []corev1.VolumeMount{{Name: "html", MountPath: "/usr/share/nginx/html"}},
		}}
		dep.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "html", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}},
		}}}
		return controllerutil.SetControllerReference(&promo, dep, r.Scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: promo.Name, Namespace: promo.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		svc.Spec.Selector = labels
		svc.Spec.Ports = []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}
		return controllerutil.SetControllerReference(&promo, svc, r.Scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}

	// "... update the status ...": with r.Status().Update(), as the lesson says.
	promo.Status.ReadyReplicas = dep.Status.ReadyReplicas
	promo.Status.Fase = "Desplegando"
	if dep.Status.ReadyReplicas == replicas {
		promo.Status.Fase = "Listo"
	}
	if err := r.Status().Update(ctx, &promo); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}
