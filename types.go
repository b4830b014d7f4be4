package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of Promocion, as in manifiestos/crd.yaml.
var GroupVersion = schema.GroupVersion{Group: "tienda.example.com", Version: "v1"}

// AddToScheme registers Promocion and PromocionList, so that the client knows
// which Go type an apiVersion/kind decodes into and which URL it lives at.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Promocion{}, &PromocionList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Limits enforced by the CRD schema; the reconciler relies on them.
const (
	// DefaultReplicas is used when spec.replicas is not set.
	DefaultReplicas int32 = 1
	// MaxReplicas is the largest spec.replicas the API server accepts.
	MaxReplicas int32 = 100
	// MaxBannerLength, in characters, keeps the page a few KiB, far below a
	// ConfigMap's 1 MiB limit even with every character escaped.
	MaxBannerLength = 2048
)

// Phases reported in status.fase.
const (
	FaseDesplegando = "Desplegando" // the Deployment has not caught up with the spec yet
	FaseListo       = "Listo"       // every desired replica is up to date and ready
)

// Condition types in status.conditions.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
	// For kstatus: Progressing and Degraded again, present only while true.
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// PromocionSpec is what the user asks for: the page's banner and how many web
// server pods serve it. It belongs to the user; the operator never writes it.
type PromocionSpec struct {
	// Banner is the text shown on the page.
	Banner string `json:"banner"`
	// Replicas is a pointer so that "0" and "not said" differ. The CRD's schema
	// defaults it to DefaultReplicas, as a Deployment's; nil still means that.
	Replicas *int32 `json:"replicas,omitempty"`
}

// PromocionStatus is how it goes, written by the operator alone, through the
// status subresource: the ready pods, the fase, and conditions for tools that
// wait (kubectl wait, kstatus).
type PromocionStatus struct {
	// Replicas and Selector serve the scale subresource.
	Replicas int32  `json:"replicas,omitempty"`
	Selector string `json:"selector,omitempty"`
	// No omitempty: 0 ready is news, and kubectl get shows LISTAS 0, not nothing.
	ReadyReplicas      int32              `json:"readyReplicas"`
	Fase               string             `json:"fase,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// Promocion is the custom resource of manifiestos/crd.yaml: a banner and a
// replica count, from which the operator makes a page, a web server and a
// Service. The embedded TypeMeta and ObjectMeta make it a Kubernetes object.
type Promocion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PromocionSpec   `json:"spec,omitempty"`
	Status PromocionStatus `json:"status,omitempty"`
}

// PromocionList is what a list of Promociones decodes into.
type PromocionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Promocion `json:"items"`
}

// DesiredReplicas resolves spec.replicas, applying the default when it is not set.
func (p *Promocion) DesiredReplicas() int32 {
	if p.Spec.Replicas == nil {
		return DefaultReplicas
	}
	return *p.Spec.Replicas
}
