package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func fullPromocion() *Promocion {
	return &Promocion{
		TypeMeta: metav1.TypeMeta{APIVersion: "tienda.example.com/v1", Kind: "Promocion"},
		ObjectMeta: metav1.ObjectMeta{Name: "rebajas-verano", Labels: map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{Name: "x", Controller: new(true)}}},
		Spec: PromocionSpec{Banner: "hola", Replicas: new(int32(3))},
		Status: PromocionStatus{ReadyReplicas: 3, Fase: FaseListo,
			Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue}}},
	}
}

// Changing every reference-typed field of the copy must leave the original as it was.
func TestDeepCopySharesNoMemory(t *testing.T) {
	orig := fullPromocion()
	cp := orig.DeepCopyObject().(*Promocion)
	if !equality.Semantic.DeepEqual(orig, cp) {
		t.Fatalf("copy differs from original:\n%+v\n%+v", orig, cp)
	}
	if cp.Spec.Replicas == orig.Spec.Replicas {
		t.Fatal("copy shares the Replicas pointer")
	}
	*cp.Spec.Replicas = 9
	cp.Status.Conditions[0].Status = metav1.ConditionFalse
	cp.Labels["a"] = "changed"
	*cp.OwnerReferences[0].Controller = false
	if !equality.Semantic.DeepEqual(orig, fullPromocion()) {
		t.Errorf("changing the copy changed the original: %+v", orig)
	}

	list := &PromocionList{Items: []Promocion{*fullPromocion()}}
	lcp := list.DeepCopyObject().(*PromocionList)
	*lcp.Items[0].Spec.Replicas = 9
	lcp.Items[0].Status.Conditions[0].Reason = "Changed"
	if *list.Items[0].Spec.Replicas != 3 || list.Items[0].Status.Conditions[0].Reason != "" {
		t.Errorf("changing the list copy changed the original: %+v", list.Items[0])
	}

	var nilPromo *Promocion
	var nilList *PromocionList
	if nilPromo.DeepCopy() != nil || nilList.DeepCopy() != nil || (&PromocionSpec{}).DeepCopy().Replicas != nil {
		t.Error("a nil copy must stay nil")
	}
}
