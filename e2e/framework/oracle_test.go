package framework

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// What must never be seen in one status: Listo too soon, or a status that
// contradicts itself; and a status as the operator writes it passes.
func TestTooSoon(t *testing.T) {
	cond := func(typ, status, reason string) any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "observedGeneration": int64(3)}
	}
	promocion := func(fase string, ready int64, conds ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "oferta", "generation": int64(3)},
			"spec":     map[string]any{"replicas": int64(2)},
			"status":   map[string]any{"fase": fase, "observedGeneration": int64(3), "readyReplicas": ready, "replicas": int64(2), "conditions": conds},
		}}
	}
	listo := []any{cond("Ready", "True", "AllReplicasReady"), cond("Progressing", "False", "Complete"), cond("Degraded", "False", "AsExpected")}
	desplegando := []any{cond("Ready", "False", "ReplicasNotReady"), cond("Progressing", "True", "Deploying"), cond("Degraded", "False", "AsExpected"), cond("Reconciling", "True", "Deploying")}
	stalled := []any{cond("Ready", "False", "ChildExists"), cond("Progressing", "True", "Deploying"), cond("Degraded", "True", "ChildExists"), cond("Stalled", "True", "ChildExists")}
	for _, tc := range []struct {
		name string
		p    *unstructured.Unstructured
		want string // "" for nothing
	}{
		{"Listo, as written", promocion("Listo", 2, listo...), ""},
		{"Desplegando, as written", promocion("Desplegando", 1, desplegando...), ""},
		{"Stalled, as written", promocion("Desplegando", 0, stalled...), ""},
		{"Listo too soon", promocion("Listo", 1, listo...), "says Listo with 1 of 2"},
		{"Ready while Desplegando", promocion("Desplegando", 1, cond("Ready", "True", "AllReplicasReady"), cond("Progressing", "True", "Deploying"), cond("Degraded", "False", "AsExpected"), cond("Reconciling", "True", "Deploying")), "is Ready and Desplegando"},
		{"Listo and still Progressing", promocion("Listo", 2, cond("Ready", "True", "AllReplicasReady"), cond("Progressing", "True", "Deploying"), cond("Degraded", "False", "AsExpected")), "with Progressing"},
		{"Reconciling missing", promocion("Desplegando", 1, desplegando[:3]...), "Reconciling"},
		{"Stalled without Degraded", promocion("Listo", 2, append(append([]any{}, listo...), cond("Stalled", "True", "X"))...), "Stalled"},
		{"a fase of its own", promocion("Terminado", 2, listo...), "only Desplegando or Listo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, bad := TooSoon(tc.p)
			if bad != (tc.want != "") || !strings.Contains(text, tc.want) {
				t.Errorf("TooSoon: %v %q, want %q", bad, text, tc.want)
			}
		})
	}
}
