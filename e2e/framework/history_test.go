package framework

import (
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The never-seen rule over a history judges each Listo against the
// Deployment versions that could justify it, and the pods ready before it.
func TestHistoryJudgesListo(t *testing.T) {
	rv := 0
	next := func() string { rv++; return strconv.Itoa(rv) }
	promocion := func(fase string, generation, observed int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "oferta", "resourceVersion": next(), "generation": generation},
			"spec":     map[string]any{"replicas": int64(2)},
			"status":   map[string]any{"fase": fase, "observedGeneration": observed},
		}}
	}
	deployment := func(hash string, generation, observed, updated, ready int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "oferta", "uid": "d-" + hash[:1], "resourceVersion": next(), "generation": generation},
			"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{"tienda.example.com/pagina-sha256": hash}}}},
			"status": map[string]any{"observedGeneration": observed, "replicas": int64(2), "updatedReplicas": updated, "readyReplicas": ready},
		}}
	}
	pod := func(name, hash string, ready, terminating bool) *unstructured.Unstructured {
		meta := map[string]any{"name": name, "resourceVersion": next(),
			"labels": map[string]any{"tienda.example.com/promocion": "oferta"}, "annotations": map[string]any{"tienda.example.com/pagina-sha256": hash}}
		if terminating {
			meta["deletionTimestamp"] = "2026-12-07T12:00:00Z"
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": meta, "status": map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": map[bool]string{true: "True", false: "False"}[ready]}}}}}
	}
	// A ReplicaSet of the Deployment whose uid is deployment, and a pod of it.
	replicaSet := func(name, deployment string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "uid": "rs-" + name, "resourceVersion": next(),
			"ownerReferences": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "oferta", "uid": deployment, "controller": true}}}}}
	}
	podOf := func(rs, name, hash string) *unstructured.Unstructured {
		p := pod(name, hash, true, false)
		p.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID("rs-" + rs), Controller: ptr.To(true)}})
		return p
	}
	type add struct {
		kind string
		obj  *unstructured.Unstructured
	}
	for _, tc := range []struct {
		name  string
		world func() []add
		want  string // in the problem; "" for none
	}{
		{"Listo after the Deployment caught up", func() []add {
			return []add{{"Deployment", deployment("a", 1, 0, 0, 0)}, {"Deployment", deployment("a", 1, 1, 2, 2)}, {"Pod", pod("p1", "a", true, false)}, {"Promocion", promocion("Listo", 1, 1)}}
		}, ""},
		{"Listo before it caught up", func() []add {
			return []add{{"Deployment", deployment("a", 1, 1, 2, 2)}, {"Deployment", deployment("b", 2, 1, 2, 2)}, {"Deployment", deployment("b", 2, 2, 1, 2)}, {"Promocion", promocion("Listo", 2, 2)}}
		}, "no version of its Deployment since it last asked for other pods had caught up"},
		{"Listo from a cache behind a later version", func() []add {
			return []add{{"Deployment", deployment("a", 1, 1, 2, 2)}, {"Deployment", deployment("a", 1, 1, 2, 1)}, {"Promocion", promocion("Listo", 1, 1)}}
		}, ""},
		{"Listo while an old pod is ready", func() []add {
			return []add{{"Pod", pod("viejo", "a", true, false)}, {"Deployment", deployment("b", 2, 2, 2, 2)}, {"Promocion", promocion("Listo", 1, 1)}}
		}, "still serves an older page"},
		{"Listo while a pod of an old ReplicaSet of the Deployment is ready", func() []add {
			return []add{{"ReplicaSet", replicaSet("viejo", "d-b")}, {"Pod", podOf("viejo", "p1", "a")}, {"Deployment", deployment("b", 2, 2, 2, 2)}, {"Promocion", promocion("Listo", 1, 1)}}
		}, "still serves an older page"},
		// Its Promocion deleted and made again: the earlier Deployment's pods
		// are the garbage collector's (the fuzzing of 3fdc998, seed
		// 8238988724531750300, judged such a Listo wrong).
		{"Listo while a pod of an earlier Deployment of the name is ready", func() []add {
			return []add{{"ReplicaSet", replicaSet("anterior", "d-a")}, {"Pod", podOf("anterior", "p1", "a")}, {"Deployment", deployment("b", 1, 1, 2, 2)}, {"Promocion", promocion("Listo", 1, 1)}}
		}, ""},
		{"Listo while an old pod terminates", func() []add {
			return []add{{"Pod", pod("viejo", "a", true, true)}, {"Deployment", deployment("b", 2, 2, 2, 2)}, {"Promocion", promocion("Listo", 1, 1)}}
		}, ""},
		{"Listo from a cache behind a manual scale", func() []add {
			scaled := deployment("a", 2, 1, 2, 2)
			scaled.Object["spec"].(map[string]any)["replicas"] = int64(4)
			return []add{{"Promocion", promocion("Desplegando", 1, 1)}, {"Deployment", deployment("a", 1, 1, 2, 2)}, {"Deployment", scaled}, {"Promocion", promocion("Listo", 1, 1)}}
		}, ""},
		{"Listo of a new spec from a version before it", func() []add {
			return []add{{"Deployment", deployment("a", 1, 1, 2, 2)}, {"Promocion", promocion("Desplegando", 2, 1)}, {"Deployment", deployment("b", 2, 1, 2, 2)}, {"Promocion", promocion("Listo", 2, 2)}}
		}, "no version of its Deployment since it last asked for other pods had caught up"},
		{"a Listo of an older generation is not judged", func() []add {
			return []add{{"Deployment", deployment("b", 2, 1, 0, 0)}, {"Promocion", promocion("Listo", 2, 1)}}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h History
			for _, a := range tc.world() {
				h.Add(a.kind, a.obj, false)
			}
			// The watches of every kind that judges deliver past the Listo.
			h.Add("Deployment", deployment("x", 1, 1, 2, 2), false)
			h.Add("ReplicaSet", replicaSet("otro", "d-x"), false)
			h.Add("Pod", pod("otro", "x", true, false), false)
			problems, pending := h.Judge()
			if pending > 0 {
				t.Errorf("%d Listo pending, with every watch past it", pending)
			}
			switch {
			case tc.want == "" && len(problems) > 0:
				t.Errorf("judged %v, want nothing", problems)
			case tc.want != "" && (len(problems) != 1 || !strings.Contains(problems[0].Text, tc.want) || !problems[0].Never):
				t.Errorf("judged %v, want one never-seen problem saying %q", problems, tc.want)
			}
		})
	}
}

// A Listo delivered before the Pods' watch delivers the deletion of an old
// pod that preceded it is not judged until that watch has caught up, or
// HistorySettle has passed with nothing from it.
func TestHistoryWaitsForTheOtherWatches(t *testing.T) {
	now := time.Unix(0, 0)
	h := History{now: func() time.Time { return now }}
	object := func(rv int, fields map[string]any) *unstructured.Unstructured {
		meta := map[string]any{"name": "oferta", "resourceVersion": strconv.Itoa(rv), "generation": int64(1),
			"labels": map[string]any{"tienda.example.com/promocion": "oferta"}, "annotations": map[string]any{"tienda.example.com/pagina-sha256": "nuevo"}}
		obj := map[string]any{"metadata": meta}
		for k, v := range fields {
			obj[k] = v
		}
		return &unstructured.Unstructured{Object: obj}
	}
	oldPod := func(rv int, terminating bool) *unstructured.Unstructured {
		p := object(rv, map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}})
		p.SetName("viejo")
		p.SetAnnotations(map[string]string{"tienda.example.com/pagina-sha256": "viejo"})
		if terminating {
			p.SetDeletionTimestamp(&metav1.Time{Time: now})
		}
		return p
	}
	// listoBeforeTheOldPodGoes: an old pod ready, the Deployment caught up,
	// then the Listo (rv 4); the old pod's deletion, if any, comes at rv 3.
	listoBeforeTheOldPodGoes := func(h *History) {
		h.Add("Pod", oldPod(1, false), false)
		h.Add("Deployment", object(2, map[string]any{
			"spec":   map[string]any{"replicas": int64(1), "template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"tienda.example.com/pagina-sha256": "nuevo"}}}},
			"status": map[string]any{"observedGeneration": int64(1), "replicas": int64(1), "updatedReplicas": int64(1), "readyReplicas": int64(1)}}), false)
		h.Add("Promocion", object(4, map[string]any{"spec": map[string]any{"replicas": int64(1)},
			"status": map[string]any{"fase": "Listo", "observedGeneration": int64(1)}}), false)
	}
	listoBeforeTheOldPodGoes(&h)
	// The Promociones' watch delivers the Listo before the Pods' delivers
	// the old pod's deletion.
	if problems, pending := h.Judge(); len(problems) > 0 || pending != 1 {
		t.Fatalf("before the Pods' watch caught up: judged %v, %d pending; want nothing judged, 1 pending", problems, pending)
	}
	h.Add("Pod", oldPod(3, true), false)
	h.Add("Deployment", object(5, nil), false) // the other watches past the Listo too
	h.Add("ReplicaSet", object(5, nil), false)
	h.Add("Pod", oldPod(6, true), false)
	if problems, pending := h.Judge(); len(problems) > 0 || pending != 0 {
		t.Fatalf("after the watches caught up: judged %v, %d pending; want nothing", problems, pending)
	}

	// The same Listo with no pod deletion to come: judged once the wait is over.
	h = History{now: func() time.Time { return now }}
	listoBeforeTheOldPodGoes(&h)
	now = now.Add(HistorySettle)
	if problems, pending := h.Judge(); len(problems) != 1 || pending != 0 || !strings.Contains(problems[0].Text, "still serves an older page") {
		t.Fatalf("after HistorySettle: judged %v, %d pending; want the old pod's page", problems, pending)
	}
}
