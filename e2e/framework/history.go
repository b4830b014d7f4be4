package framework

// What must never be seen, judged over a namespace's history: every version
// of its Promociones, Deployments, ReplicaSets and Pods that a watch
// delivered, ordered by resourceVersion (etcd's revision, one order for every
// resource). Listo is a
// claim about the world at the moment it was written: the Deployment had
// acted on the Promocion's latest spec, and every pod asked for ran it and was
// ready (docs/api.md, the status). The operator reads the world from its
// cache, which may be behind; so a Listo is judged against every Deployment
// version it could have read: it is wrong when none of them, from the last
// change of what the Deployment asks for (replicas, page) to the Listo, was
// caught up, or when a pod of that Deployment that was ready just before the
// Listo still carried an older page. The pods of an earlier Deployment of the
// name (its Promocion deleted and made again) are the garbage collector's to
// remove, as the steady state's rule for them says (oracle.go): they are
// not among the replicas the Listo speaks for.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// History is what the watches of one namespace delivered.
type History struct {
	mu       sync.Mutex
	versions []version
	// delivered is, for each kind, the highest resourceVersion its watch
	// has delivered: each watch delivers in order, so every version of that
	// kind up to it is in the history.
	delivered map[string]int64
	now       func() time.Time // time.Now unless a test sets it
}

type version struct {
	rv      int64
	kind    string
	name    string
	obj     *unstructured.Unstructured
	deleted bool
	at      time.Time // when the watch delivered it
}

// HistorySettle is how long a Listo that looks unjustified waits for the
// watches of the kinds that judge it to deliver what came before it. The
// watches are separate streams: the Promociones' may deliver a Listo before the
// Pods' delivers the deletion of an old pod that preceded it (the chaos run
// of 319c34d judged such a Listo wrong, seen for 0.0 ms). Past this, a
// stream that delivered nothing since is taken as having nothing to
// deliver.
const HistorySettle = 2 * time.Second

func (h *History) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

// Add records one version of a Promocion, Deployment or Pod as a watch
// delivered it (deleted: its deletion).
func (h *History) Add(kind string, obj *unstructured.Unstructured, deleted bool) {
	rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return // not an integer: no order to judge by (every kube-apiserver gives one)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.delivered == nil {
		h.delivered = map[string]int64{}
	}
	h.delivered[kind] = max(h.delivered[kind], rv)
	h.versions = append(h.versions, version{rv: rv, kind: kind, name: obj.GetName(), obj: obj, deleted: deleted, at: h.clock()})
}

// Judge lists what the history shows that must never be seen: a Promocion
// Listo, for its current generation, that its Deployment and pods did not
// justify when it was written. A Listo that looks unjustified before the
// watches of judgedBy have delivered everything up to it, for
// less than HistorySettle, is not judged yet: pending counts those.
func (h *History) Judge() (problems []Problem, pending int) {
	h.mu.Lock()
	vs := slices.Clone(h.versions)
	delivered := maps.Clone(h.delivered)
	now := h.clock()
	h.mu.Unlock()
	slices.SortStableFunc(vs, func(a, b version) int { return cmp.Compare(a.rv, b.rv) })
	seen := map[string]bool{}
	for i, v := range vs {
		if v.kind != "Promocion" || v.deleted {
			continue
		}
		text, bad := unjustifiedListo(v, vs[:i])
		switch {
		case !bad || seen[text]:
		case slices.ContainsFunc(judgedBy, func(kind string) bool { return delivered[kind] < v.rv }):
			if now.Sub(v.at) < HistorySettle {
				pending++
				continue
			}
			fallthrough
		default:
			seen[text] = true
			problems = append(problems, Problem{text, true})
		}
	}
	return problems, pending
}

// judgedBy are the kinds whose versions judge a Listo.
var judgedBy = []string{"Deployment", "ReplicaSet", "Pod"}

// unjustifiedListo judges a Promocion version against the versions before it.
func unjustifiedListo(p version, before []version) (string, bool) {
	pr := p.obj
	fase, _, _ := unstructured.NestedString(pr.Object, "status", "fase")
	observed, _, _ := unstructured.NestedInt64(pr.Object, "status", "observedGeneration")
	if fase != "Listo" || observed != pr.GetGeneration() {
		return "", false
	}
	want := int64(1)
	if r, found, _ := unstructured.NestedInt64(pr.Object, "spec", "replicas"); found {
		want = r
	}
	// The Deployment's versions that could justify the Listo, latest first:
	// since the Promocion's spec became what the Listo speaks for (and the
	// one version the operator could have read then), those asking for the
	// replicas it wants and for the latest page among them. A version
	// asking for other replicas is someone else's edit (a manual scale) or
	// the way there: skipped, not an end, for the operator's cache may have
	// read the version before it. A version asking for another page ends
	// the window: the page changed after it.
	start := int64(0) // the resourceVersion since which the Promocion's spec is the Listo's
	for i := len(before) - 1; i >= 0; i-- {
		v := before[i]
		if v.kind == "Promocion" && v.name == p.name && (v.deleted || v.obj.GetUID() != pr.GetUID() || v.obj.GetGeneration() != pr.GetGeneration()) {
			start = v.rv
			break
		}
	}
	var window []*unstructured.Unstructured
	for i := len(before) - 1; i >= 0; i-- {
		v := before[i]
		if v.kind != "Deployment" || v.name != p.name {
			continue
		}
		if v.deleted {
			break
		}
		if replicas, _, _ := unstructured.NestedInt64(v.obj.Object, "spec", "replicas"); replicas != want {
			if v.rv <= start {
				break
			}
			continue
		}
		if len(window) > 0 && asksFor(v.obj) != asksFor(window[0]) {
			break
		}
		window = append(window, v.obj)
		if v.rv <= start {
			break // the version the operator could have read when the spec changed
		}
	}
	if len(window) == 0 {
		return "", false // no Deployment seen yet: the watch began after it; nothing to judge by
	}
	if !slices.ContainsFunc(window, func(d *unstructured.Unstructured) bool { return caughtUp(d, want) }) {
		d := window[0]
		st := func(f string) int64 { v, _, _ := unstructured.NestedInt64(d.Object, "status", f); return v }
		return fmt.Sprintf("Promocion %s says Listo (resourceVersion %d) while no version of its Deployment since it last asked for other pods had caught up: the latest had observedGeneration %d of %d, %d updated and %d ready of %d",
			p.name, p.rv, st("observedGeneration"), d.GetGeneration(), st("updatedReplicas"), st("readyReplicas"), want), true
	}
	// Every pod of the Deployment ready just before the Listo runs its page.
	hash, _, _ := unstructured.NestedString(window[0].Object, "spec", "template", "metadata", "annotations", "tienda.example.com/pagina-sha256")
	latest := map[string]version{}
	deploymentOf := map[types.UID]types.UID{} // a ReplicaSet's controller
	for _, v := range before {
		switch {
		case v.kind == "Pod" && v.obj.GetLabels()["tienda.example.com/promocion"] == p.name:
			latest[v.name] = v
		case v.kind == "ReplicaSet":
			if ref := metav1.GetControllerOfNoCopy(v.obj); ref != nil {
				deploymentOf[v.obj.GetUID()] = ref.UID
			}
		}
	}
	for _, v := range latest {
		if v.deleted || v.obj.GetDeletionTimestamp() != nil || !podReady(v.obj) {
			continue
		}
		// A pod whose ReplicaSet is unknown is judged: only one known to
		// belong to another Deployment is not.
		if rs := metav1.GetControllerOfNoCopy(v.obj); rs != nil {
			if d, ok := deploymentOf[rs.UID]; ok && d != window[0].GetUID() {
				continue
			}
		}
		if old := v.obj.GetAnnotations()["tienda.example.com/pagina-sha256"]; old != hash {
			return fmt.Sprintf("Promocion %s says Listo (resourceVersion %d) while its pod %s, ready, still serves an older page (hash %.12s, the Deployment's %.12s)",
				p.name, p.rv, v.name, old, hash), true
		}
	}
	return "", false
}

// asksFor is what a Deployment's spec asks of its pods: how many, which page.
func asksFor(d *unstructured.Unstructured) string {
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	hash, _, _ := unstructured.NestedString(d.Object, "spec", "template", "metadata", "annotations", "tienda.example.com/pagina-sha256")
	return fmt.Sprint(replicas, " ", hash)
}

// caughtUp is docs/api.md's rule for a Deployment: it has acted on its latest
// spec, and its replicas, updated replicas and ready replicas all equal want.
func caughtUp(d *unstructured.Unstructured, want int64) bool {
	st := func(f string) int64 { v, _, _ := unstructured.NestedInt64(d.Object, "status", f); return v }
	spec, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	return spec == want && st("observedGeneration") >= d.GetGeneration() &&
		st("replicas") == want && st("updatedReplicas") == want && st("readyReplicas") == want
}

func podReady(pod *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(pod.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}
