//go:build oracle

package main

// The reliability tests' oracle, built only by them (go build -tags oracle):
//
//	operador-promociones -oracle NAMESPACE [WEB-IMAGE]
//
// prints, one line each, how NAMESPACE differs from what a fresh operator would
// make of each Promocion's current spec and UID, and exits 1 if it does. It
// judges with the operator's own pure functions: a child is right when
// SetControllerReference and the mutate function would change nothing in it,
// as the server holds it, and its immutable selector is the one they would
// set; a status is right when computeStatus, given the Deployment, would
// write nothing, and says Listo: the end of the road, where every pod runs
// the latest spec. Beside that: no child of the operator's without its
// Promocion, no ReplicaSet beyond those the Deployment controller keeps,
// nothing Terminating.

import (
	"context"
	"fmt"
	"html"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

func init() {
	if len(os.Args) < 3 || os.Args[1] != "-oracle" {
		return
	}
	image := DefaultWebImage
	if len(os.Args) > 3 {
		image = os.Args[3]
	}
	problems, err := oracle(context.Background(), os.Args[2], image)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	os.Exit(0)
}

func oracle(ctx context.Context, ns, image string) ([]string, error) {
	c, err := client.New(ctrl.GetConfigOrDie(), client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, err
	}
	var (
		promos PromocionList
		cms    corev1.ConfigMapList
		deps   appsv1.DeploymentList
		svcs   corev1.ServiceList
		rss    appsv1.ReplicaSetList
		pods   corev1.PodList
	)
	for _, l := range []client.ObjectList{&promos, &cms, &deps, &svcs, &rss, &pods} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	expected := map[string]bool{} // kind/name of every child some Promocion asks for

	for i := range promos.Items {
		p := &promos.Items[i]
		if p.DeletionTimestamp != nil {
			bad("Promocion %s is Terminating", p.Name)
			continue
		}
		cm := find(cms.Items, ConfigMapName(p))
		dep := find(deps.Items, p.Name)
		svc := find(svcs.Items, p.Name)
		expected["ConfigMap/"+ConfigMapName(p)], expected["Deployment/"+p.Name], expected["Service/"+p.Name] = true, true, true
		checkChild(cm, "ConfigMap", ConfigMapName(p), p, func(o *corev1.ConfigMap) { mutateConfigMap(o, p) }, bad)
		// And two checks that do not trust the operator's functions.
		if cm != nil && !strings.Contains(cm.Data["index.html"], "<h1>"+html.EscapeString(p.Spec.Banner)+"</h1>") {
			bad("ConfigMap %s does not show the banner, escaped", cm.Name)
		}
		if dep != nil && (dep.Spec.Replicas == nil || *dep.Spec.Replicas != p.DesiredReplicas()) {
			bad("Deployment %s has %v replicas, want %d", dep.Name, dep.Spec.Replicas, p.DesiredReplicas())
		}
		checkChild(svc, "Service", p.Name, p, func(o *corev1.Service) { mutateService(o, p) }, bad)
		checkChild(dep, "Deployment", p.Name, p, func(o *appsv1.Deployment) { mutateDeployment(o, p, image) }, bad)
		if dep != nil && !equality.Semantic.DeepEqual(dep.Spec.Selector, &metav1.LabelSelector{MatchLabels: selectorLabels(p)}) {
			bad("Deployment %s selects %v, want %v", dep.Name, dep.Spec.Selector, selectorLabels(p))
		}
		if dep == nil || metav1.GetControllerOf(dep) == nil || metav1.GetControllerOf(dep).UID != p.UID {
			dep = nil
		}
		if want := computeStatus(p, dep, nil, metav1.Now()); !equality.Semantic.DeepEqual(p.Status, want) {
			bad("Promocion %s: status %s, want %s", p.Name, statusLine(p.Status), statusLine(want))
		} else if p.Status.Fase != FaseListo {
			// Right for the moment, but still on its way: the end is Listo.
			bad("Promocion %s is %s", p.Name, statusLine(p.Status))
		}
	}

	owned := func(kind string, o metav1.Object) {
		// The operator's: controlled by a Promocion, or labelled by it and
		// controlled by no one (a child whose ownerReference was stripped).
		ref := metav1.GetControllerOf(o)
		mine := ref != nil && ref.Kind == "Promocion" || ref == nil && o.GetLabels()[LabelManagedBy] == operatorName
		if mine && !expected[kind+"/"+o.GetName()] {
			bad("%s %s belongs to no Promocion", kind, o.GetName())
		}
		if o.GetDeletionTimestamp() != nil {
			bad("%s %s is Terminating", kind, o.GetName())
		}
	}
	for i := range cms.Items {
		owned("ConfigMap", &cms.Items[i])
	}
	for i := range svcs.Items {
		owned("Service", &svcs.Items[i])
	}
	active := map[string]int{} // Deployment name: its ReplicaSets with pods wanted
	for i := range deps.Items {
		owned("Deployment", &deps.Items[i])
		active[deps.Items[i].Name] = 0
	}
	for _, rs := range rss.Items {
		ref := metav1.GetControllerOf(&rs)
		d := (*appsv1.Deployment)(nil)
		if ref != nil {
			d = find(deps.Items, ref.Name)
		}
		switch {
		case d == nil || d.UID != ref.UID:
			bad("ReplicaSet %s outlives its Deployment", rs.Name)
		case rs.Spec.Replicas != nil && *rs.Spec.Replicas > 0:
			active[d.Name]++
			if !equality.Semantic.DeepEqual(rs.Spec.Template.Annotations, d.Spec.Template.Annotations) {
				bad("ReplicaSet %s runs an old pod template of %s", rs.Name, d.Name)
			}
		}
	}
	for name, n := range active {
		if n > 1 {
			bad("Deployment %s has %d ReplicaSets with pods wanted", name, n)
		}
	}
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil {
			bad("Pod %s is Terminating", pod.Name)
		}
	}
	return problems, nil
}

// checkChild reports how child differs from what the operator would make of
// it for p; nil is a missing child.
func checkChild[T any, P interface {
	*T
	client.Object
}](child P, kind, name string, p *Promocion, mutate func(P), bad func(string, ...any)) {
	if child == nil {
		bad("%s %s is missing", kind, name)
		return
	}
	want := P(child.DeepCopyObject().(P))
	if err := controllerutil.SetControllerReference(p, want, newScheme()); err != nil {
		bad("%s %s: %v", kind, name, err)
		return
	}
	mutate(want)
	if !equality.Semantic.DeepEqual(child, want) {
		bad("%s %s is not what a fresh operator would make of it: %s", kind, name, diffLine(child, want))
	}
}

// diffLine names the top-level parts that differ.
func diffLine(got, want client.Object) string {
	var parts []string
	if !equality.Semantic.DeepEqual(got.GetLabels(), want.GetLabels()) {
		parts = append(parts, fmt.Sprintf("labels %v, want %v", got.GetLabels(), want.GetLabels()))
	}
	if !equality.Semantic.DeepEqual(got.GetOwnerReferences(), want.GetOwnerReferences()) {
		parts = append(parts, "ownerReferences differ")
	}
	if len(parts) == 0 {
		parts = append(parts, "its spec or data differ")
	}
	return strings.Join(parts, "; ")
}

func statusLine(s PromocionStatus) string {
	return fmt.Sprintf("%s %d/%d for generation %d", s.Fase, s.ReadyReplicas, s.Replicas, s.ObservedGeneration)
}

func find[T any, P interface {
	*T
	GetName() string
}](items []T, name string) P {
	for i := range items {
		if P(&items[i]).GetName() == name {
			return &items[i]
		}
	}
	return nil
}
