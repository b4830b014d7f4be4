// The lesson's operator, as ../shared/seed's lesson writes it: its types,
// Reconcile and SetupWithManager unchanged. The benchmark builds it as a peer
// (e2e/bench/bench_test.go); it is not shipped, tested or linted as ours is.
package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var GroupVersion = schema.GroupVersion{Group: "tienda.example.com", Version: "v1"}

type PromocionSpec struct {
	Banner   string `json:"banner"`
	Replicas *int32 `json:"replicas,omitempty"`
}

type PromocionStatus struct {
	ReadyReplicas int32  `json:"readyReplicas,omitempty"`
	Fase          string `json:"fase,omitempty"`
}

type Promocion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PromocionSpec   `json:"spec,omitempty"`
	Status PromocionStatus `json:"status,omitempty"`
}

// Not shown in the lesson, which names them: the list type, AddToScheme and
// the hand-written DeepCopy ("twenty lines").

type PromocionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Promocion `json:"items"`
}

var (
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Promocion{}, &PromocionList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	AddToScheme = SchemeBuilder.AddToScheme
)

func (in *Promocion) DeepCopyInto(out *Promocion) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec.Replicas != nil {
		out.Spec.Replicas = new(int32)
		*out.Spec.Replicas = *in.Spec.Replicas
	}
}

func (in *Promocion) DeepCopyObject() runtime.Object {
	out := new(Promocion)
	in.DeepCopyInto(out)
	return out
}

func (in *PromocionList) DeepCopyObject() runtime.Object {
	out := new(PromocionList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Promocion, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
