//go:build careful

package main

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Reconcile as a careful reader of the lesson writes it: the "lesson,
// careful" candidate. It is reconcile.go with three changes, each what the
// lesson's own words ask for ("only if something has really changed, does
// an Update"): the mutate functions set only the fields they own, inside the
// lists that the API server defaults (so its defaults do not differ on every
// pass); the Deployment's selector, immutable, is set only on create; the
// status is written only when it changed. Nothing else: one worker, no
// leader election, the lesson's main.
func (r *PromocionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var promo Promocion
	if err := r.Get(ctx, req.NamespacedName, &promo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	replicas := int32(1)
	if promo.Spec.Replicas != nil {
		replicas = *promo.Spec.Replicas
	}
	labels := map[string]string{"app": promo.Name}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: promo.Name + "-html", Namespace: promo.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["index.html"] = "<html><body><h1>" + promo.Spec.Banner + "</h1></body></html>"
		return controllerutil.SetControllerReference(&promo, cm, r.Scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}

	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: promo.Name, Namespace: promo.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		dep.Spec.Replicas = &replicas
		if dep.CreationTimestamp.IsZero() {
			dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		}
		if dep.Spec.Template.Labels == nil {
			dep.Spec.Template.Labels = map[string]string{}
		}
		for k, v := range labels {
			dep.Spec.Template.Labels[k] = v
		}
		pod := &dep.Spec.Template.Spec
		c := named(&pod.Containers, "web", func(c corev1.Container) string { return c.Name })
		c.Name, c.Image = "web", "nginx:1.27"
		named(&c.Ports, "80", func(p corev1.ContainerPort) string { return strconv.Itoa(int(p.ContainerPort)) }).ContainerPort = 80
		m := named(&c.VolumeMounts, "html", func(m corev1.VolumeMount) string { return m.Name })
		m.Name, m.MountPath = "html", "/usr/share/nginx/html"
		v := named(&pod.Volumes, "html", func(v corev1.Volume) string { return v.Name })
		v.Name = "html"
		if v.ConfigMap == nil {
			v.ConfigMap = &corev1.ConfigMapVolumeSource{}
		}
		v.ConfigMap.Name = cm.Name
		return controllerutil.SetControllerReference(&promo, dep, r.Scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: promo.Name, Namespace: promo.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		svc.Spec.Selector = labels
		p := named(&svc.Spec.Ports, "80", func(p corev1.ServicePort) string { return strconv.Itoa(int(p.Port)) })
		p.Port, p.TargetPort = 80, intstr.FromInt32(80)
		return controllerutil.SetControllerReference(&promo, svc, r.Scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}

	status := promo.Status
	status.ReadyReplicas = dep.Status.ReadyReplicas
	status.Fase = "Desplegando"
	if dep.Status.ReadyReplicas == replicas {
		status.Fase = "Listo"
	}
	if equality.Semantic.DeepEqual(status, promo.Status) {
		return ctrl.Result{}, nil
	}
	promo.Status = status
	if err := r.Status().Update(ctx, &promo); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// named is the element of list whose key is key, appended if there is none:
// the fields the API server defaulted in it stay as they are.
func named[T any](list *[]T, key string, keyOf func(T) string) *T {
	for i := range *list {
		if keyOf((*list)[i]) == key {
			return &(*list)[i]
		}
	}
	var zero T
	*list = append(*list, zero)
	return &(*list)[len(*list)-1]
}
