package main

// The reliability tests' oracle: how a namespace differs from what a fresh
// operator would make of each Promocion's current spec and UID. It judges
// with the operator's own pure functions: a child is right when
// SetControllerReference and its kind's mutate function would change nothing
// in it, as the server holds it, and the Deployment's immutable selector is
// the one they would set; a status is right when computeStatus, given the
// Deployment, would write nothing, and says Listo: the end of the road, where
// every pod runs the latest spec. Beside that: no child of the operator's
// without its Promocion, no ReplicaSet beyond those the Deployment controller
// keeps, nothing Terminating. Every kind of childKinds is checked.
//
// oracle_cli.go, built only for the tests (-tags oracle), reads the namespace
// from the API server and prints the answer; the judging is here, untagged, so
// that the unit tests check it too (the linker leaves it out of the operator).

import (
	"fmt"
	"html"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// world is what one namespace holds.
type world struct {
	promociones []Promocion
	children    map[string][]client.Object // by kind, every object of each kind in childKinds
	replicaSets []appsv1.ReplicaSet
	pods        []corev1.Pod
}

// judge lists, one line each, how w differs from what a fresh operator
// running with the web image image would make of it.
func judge(w world, image string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	expected := map[string]bool{} // kind/name of every child some Promocion asks for
	scheme := newScheme()

	for i := range w.promociones {
		p := &w.promociones[i]
		if p.DeletionTimestamp != nil {
			bad("Promocion %s is Terminating", p.Name)
			continue
		}
		for _, k := range childKinds {
			name := k.Name(p)
			expected[k.Kind+"/"+name] = true
			child := find(w.children[k.Kind], name)
			if child == nil {
				bad("%s %s is missing", k.Kind, name)
				continue
			}
			want := child.DeepCopyObject().(client.Object)
			if err := controllerutil.SetControllerReference(p, want, scheme); err != nil {
				bad("%s %s: %v", k.Kind, name, err)
				continue
			}
			k.Mutate(want, p, image)
			if !equality.Semantic.DeepEqual(child, want) {
				bad("%s %s is not what a fresh operator would make of it: %s", k.Kind, name, diffLine(child, want))
			}
		}
		cm, _ := find(w.children["ConfigMap"], ConfigMapName(p)).(*corev1.ConfigMap)
		dep, _ := find(w.children["Deployment"], p.Name).(*appsv1.Deployment)
		// And checks that do not trust the operator's functions.
		if cm != nil && !strings.Contains(cm.Data["index.html"], "<h1>"+html.EscapeString(p.Spec.Banner)+"</h1>") {
			bad("ConfigMap %s does not show the banner, escaped", cm.Name)
		}
		if dep != nil && (dep.Spec.Replicas == nil || *dep.Spec.Replicas != p.DesiredReplicas()) {
			bad("Deployment %s has %v replicas, want %d", dep.Name, dep.Spec.Replicas, p.DesiredReplicas())
		}
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

	for _, k := range childKinds {
		for _, o := range w.children[k.Kind] {
			// The operator's: controlled by a Promocion, or labelled by it and
			// controlled by no one (a child whose ownerReference was stripped).
			ref := metav1.GetControllerOf(o)
			mine := ref != nil && ref.Kind == "Promocion" || ref == nil && o.GetLabels()[LabelManagedBy] == operatorName
			if mine && !expected[k.Kind+"/"+o.GetName()] {
				bad("%s %s belongs to no Promocion", k.Kind, o.GetName())
			}
			if o.GetDeletionTimestamp() != nil {
				bad("%s %s is Terminating", k.Kind, o.GetName())
			}
		}
	}
	active := map[string]int{} // Deployment name: its ReplicaSets with pods wanted
	for _, o := range w.children["Deployment"] {
		active[o.GetName()] = 0
	}
	for _, rs := range w.replicaSets {
		ref := metav1.GetControllerOf(&rs)
		var d *appsv1.Deployment
		if ref != nil {
			d, _ = find(w.children["Deployment"], ref.Name).(*appsv1.Deployment)
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
	for _, pod := range w.pods {
		if pod.DeletionTimestamp != nil {
			bad("Pod %s is Terminating", pod.Name)
		}
	}
	return problems
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

// find is the object of objs named name, or nil.
func find(objs []client.Object, name string) client.Object {
	for _, o := range objs {
		if o.GetName() == name {
			return o
		}
	}
	return nil
}
