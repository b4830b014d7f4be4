package main

// The status: what a Promocion's status should say, given its Deployment and
// how applying its children went. Pure functions, as the ReplicaSet
// controller keeps its status maths apart (replica_set_utils.go): no client
// and no clock, so the tests call them directly.

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// deploymentCaughtUp tells whether the Deployment controller has acted on the
// Deployment's latest spec and every desired pod is up to date and ready.
func deploymentCaughtUp(d *appsv1.Deployment, desired int32) bool {
	s := d.Status
	return d.Spec.Replicas != nil && *d.Spec.Replicas == desired &&
		s.ObservedGeneration >= d.Generation &&
		s.UpdatedReplicas == desired && s.Replicas == desired && s.ReadyReplicas == desired
}

// computeStatus is what the Promocion's status should say, given its Deployment
// (nil when the operator could not make it its own) and the error from applying
// the children. Conditions keep their lastTransitionTime unless they change.
func computeStatus(p *Promocion, d *appsv1.Deployment, applyErr error, now metav1.Time) PromocionStatus {
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	desired := p.DesiredReplicas()

	st.Selector = labels.SelectorFromSet(selectorLabels(p)).String()
	st.Replicas, st.ReadyReplicas, st.Fase = 0, 0, FaseDesplegando
	if d != nil {
		st.Replicas, st.ReadyReplicas = d.Status.Replicas, d.Status.ReadyReplicas
		if deploymentCaughtUp(d, desired) {
			st.Fase = FaseListo
		}
	}
	replicas := fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, desired)

	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: p.Generation, LastTransitionTime: now,
		})
	}
	switch {
	case applyErr != nil:
		reason, msg := explainApplyError(applyErr)
		set(ConditionDegraded, metav1.ConditionTrue, reason, msg)
		set(ConditionReady, metav1.ConditionFalse, reason, msg)
	default:
		set(ConditionDegraded, metav1.ConditionFalse, "AsExpected", listOf(childKindNames())+" are applied")
		if st.Fase == FaseListo {
			set(ConditionReady, metav1.ConditionTrue, "AllReplicasReady", replicas)
		} else {
			set(ConditionReady, metav1.ConditionFalse, "ReplicasNotReady", replicas)
		}
	}
	if st.Fase == FaseListo {
		set(ConditionProgressing, metav1.ConditionFalse, "Complete", replicas)
	} else {
		set(ConditionProgressing, metav1.ConditionTrue, "Deploying", replicas+"; the Deployment is rolling out the latest spec")
	}

	// kstatus, which Flux and other GitOps tools use to judge health, reads
	// Stalled and Reconciling, present only while true. A stalled Promocion is
	// not making progress, so it is not Reconciling. Each is set in place, not
	// removed and added back, so that it keeps its lastTransitionTime.
	degraded := *meta.FindStatusCondition(st.Conditions, ConditionDegraded)
	progressing := *meta.FindStatusCondition(st.Conditions, ConditionProgressing)
	stalled := degraded.Status == metav1.ConditionTrue
	setOrRemove := func(typ string, present bool, like metav1.Condition) {
		if present {
			set(typ, metav1.ConditionTrue, like.Reason, like.Message)
		} else {
			meta.RemoveStatusCondition(&st.Conditions, typ)
		}
	}
	setOrRemove(ConditionStalled, stalled, degraded)
	setOrRemove(ConditionReconciling, !stalled && progressing.Status == metav1.ConditionTrue, progressing)
	return st
}

// explainApplyError turns a failure to apply the children into a condition
// reason and a message that says what to do about it.
func explainApplyError(err error) (reason, msg string) {
	var owned *controllerutil.AlreadyOwnedError
	if errors.As(err, &owned) {
		return "ChildOwnedByOther", fmt.Sprintf(
			"%s already exists and is controlled by %s %s; the operator leaves it alone. Delete it, or give the Promocion another name",
			owned.Object.GetName(), owned.Owner.Kind, owned.Owner.Name)
	}
	// Every object in the way is named, so that the user can see them all at once.
	var exist []string
	every(err, func(e error) bool {
		var exists *ChildExistsError
		if errors.As(e, &exists) {
			exist = append(exist, exists.Kind+" "+exists.Name)
		}
		return true
	})
	switch len(exist) {
	case 0:
	case 1:
		return "ChildExists", exist[0] + " already exists and " + notMadeHere + "; " +
			"the operator leaves it untouched. Give the Promocion another name, or delete that object if it is not needed"
	default:
		return "ChildExists", listOf(exist) + " already exist and were not made by the operator for this Promocion; " +
			"the operator leaves them untouched. Give the Promocion another name, or delete those objects if they are not needed"
	}
	return "ApplyFailed", "could not apply the children: " + err.Error()
}
