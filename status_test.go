package main

// The status's pure functions (status.go): table tests, no cluster.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	dep := func(generation, observed int64, replicas, updated, ready int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: generation},
			Spec:       appsv1.DeploymentSpec{Replicas: new(int32(3))},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready},
		}
	}
	owned := &controllerutil.AlreadyOwnedError{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "rebajas-verano-html"}},
		Owner: metav1.OwnerReference{Kind: "Otro", Name: "ajeno"}}
	exists := fmt.Errorf("Service rebajas-verano: %w", &ChildExistsError{Kind: "Service", Name: "rebajas-verano"})

	for _, tc := range []struct {
		name        string
		dep         *appsv1.Deployment
		err         error
		fase        string
		ready       int32
		readyCond   metav1.ConditionStatus
		reason      string
		progressing metav1.ConditionStatus
		degraded    metav1.ConditionStatus
	}{
		{"no Deployment yet", nil, nil, FaseDesplegando, 0, metav1.ConditionFalse, "ReplicasNotReady", metav1.ConditionTrue, metav1.ConditionFalse},
		{"rolling out", dep(1, 1, 3, 3, 1), nil, FaseDesplegando, 1, metav1.ConditionFalse, "ReplicasNotReady", metav1.ConditionTrue, metav1.ConditionFalse},
		{"all ready", dep(2, 2, 3, 3, 3), nil, FaseListo, 3, metav1.ConditionTrue, "AllReplicasReady", metav1.ConditionFalse, metav1.ConditionFalse},
		{"ready but new spec not seen", dep(2, 1, 3, 3, 3), nil, FaseDesplegando, 3, metav1.ConditionFalse, "ReplicasNotReady", metav1.ConditionTrue, metav1.ConditionFalse},
		{"old pods still running", dep(2, 2, 4, 3, 3), nil, FaseDesplegando, 3, metav1.ConditionFalse, "ReplicasNotReady", metav1.ConditionTrue, metav1.ConditionFalse},
		{"child owned by another", dep(2, 2, 3, 3, 3), owned, FaseListo, 3, metav1.ConditionFalse, "ChildOwnedByOther", metav1.ConditionFalse, metav1.ConditionTrue},
		{"child someone else made", dep(2, 2, 3, 3, 3), exists, FaseListo, 3, metav1.ConditionFalse, "ChildExists", metav1.ConditionFalse, metav1.ConditionTrue},
		{"write failed", nil, errors.New("boom"), FaseDesplegando, 0, metav1.ConditionFalse, "ApplyFailed", metav1.ConditionTrue, metav1.ConditionTrue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := promocion("rebajas-verano", "hola", new(int32(3)))
			p.Generation = 4
			st := computeStatus(p, tc.dep, tc.err, now)
			if st.Fase != tc.fase || st.ReadyReplicas != tc.ready || st.ObservedGeneration != 4 {
				t.Errorf("fase %q ready %d observedGeneration %d; want %q %d 4", st.Fase, st.ReadyReplicas, st.ObservedGeneration, tc.fase, tc.ready)
			}
			ready := meta.FindStatusCondition(st.Conditions, ConditionReady)
			if ready == nil || ready.Status != tc.readyCond || ready.Reason != tc.reason || ready.Message == "" || ready.ObservedGeneration != 4 {
				t.Errorf("Ready condition %+v, want %s/%s", ready, tc.readyCond, tc.reason)
			}
			if c := meta.FindStatusCondition(st.Conditions, ConditionProgressing); c == nil || c.Status != tc.progressing {
				t.Errorf("Progressing condition %+v, want %s", c, tc.progressing)
			}
			if c := meta.FindStatusCondition(st.Conditions, ConditionDegraded); c == nil || c.Status != tc.degraded {
				t.Errorf("Degraded condition %+v, want %s", c, tc.degraded)
			}
			stalled := tc.degraded == metav1.ConditionTrue
			reconciling := tc.progressing == metav1.ConditionTrue && !stalled
			for typ, want := range map[string]bool{ConditionStalled: stalled, ConditionReconciling: reconciling} {
				if c := meta.FindStatusCondition(st.Conditions, typ); (c != nil) != want {
					t.Errorf("%s condition %+v, want present: %v", typ, c, want)
				}
			}
			if errors.Is(tc.err, owned) && !strings.Contains(ready.Message, "rebajas-verano-html") {
				t.Errorf("the message does not name the child: %q", ready.Message)
			}
			if errors.Is(tc.err, exists) && !strings.HasPrefix(ready.Message, "Service rebajas-verano already exists and was not made by the operator") {
				t.Errorf("the message does not name the object: %q", ready.Message)
			}
		})
	}
	// Several objects in the way are all named, so that the user sees them all at once.
	t.Run("three objects in the way", func(t *testing.T) {
		p := promocion("pagos", "hola", nil)
		err := errors.Join(fmt.Errorf("ConfigMap pagos-html: %w", &ChildExistsError{Kind: "ConfigMap", Name: "pagos-html"}),
			fmt.Errorf("Deployment pagos: %w", &ChildExistsError{Kind: "Deployment", Name: "pagos"}),
			fmt.Errorf("Service pagos: %w", &ChildExistsError{Kind: "Service", Name: "pagos"}))
		ready := meta.FindStatusCondition(computeStatus(p, nil, err, now).Conditions, ConditionReady)
		if want := "ConfigMap pagos-html, Deployment pagos and Service pagos already exist and were not made by the operator"; ready.Reason != "ChildExists" || !strings.HasPrefix(ready.Message, want) {
			t.Errorf("Ready %s %q, want ChildExists and a message starting %q", ready.Reason, ready.Message, want)
		}
	})
}

// A status computed twice from the same world is the same, lastTransitionTime
// included: otherwise every reconcile would write it.
// Recomputing the status later, with nothing changed, gives the same status:
// otherwise every reconcile would write it again.
func TestComputeStatusIsStable(t *testing.T) {
	p := promocion("rebajas-verano", "hola", new(int32(3)))
	ready := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: new(int32(3))},
		Status: appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3}}
	rolling := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: new(int32(3))},
		Status: appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2}}
	for name, tc := range map[string]struct {
		d   *appsv1.Deployment
		err error
	}{
		"Listo":         {ready, nil},
		"rolling out":   {rolling, nil},
		"failing apply": {nil, errors.New("boom")},
	} {
		p.Status = PromocionStatus{}
		p.Status = computeStatus(p, tc.d, tc.err, metav1.NewTime(time.Unix(1000, 0)))
		again := computeStatus(p, tc.d, tc.err, metav1.NewTime(time.Unix(2000, 0)))
		if !equality.Semantic.DeepEqual(p.Status, again) {
			t.Errorf("%s: status changed with nothing else changing:\n%+v\n%+v", name, p.Status, again)
		}
	}
}

// kubectl get promociones prints LISTAS from status.readyReplicas: at 0 ready
// it must say 0, so the 0 must be in the JSON.
func TestStatusSaysZeroReady(t *testing.T) {
	p := promocion("rebajas-verano", "hola", new(int32(3)))
	none := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: new(int32(3))}, Status: appsv1.DeploymentStatus{Replicas: 3}}
	b, err := json.Marshal(computeStatus(p, none, nil, metav1.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"readyReplicas":0`) {
		t.Errorf("the status leaves out readyReplicas at 0: %s", b)
	}
}
