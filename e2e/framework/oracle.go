package framework

// The reliability tests' oracle, written from the specification and not from
// the operator's code: the facts below are what docs/api.md, the README and
// the lesson say a Promocion makes, as literals that a reader checks against
// them, one line each. The oracle compares a namespace with them. It uses no
// function of the operator (it cannot: package main is not importable, and it
// must not: a wrong image, port, probe, selector or Listo rule in the
// operator would be a fixed point of its own functions). The one thing it
// takes from the operator is its table of child kinds (-children), and only to
// fail at start-up if the operator makes a kind that the facts do not cover.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// specChildren are the children of the Promocion {promocion}, by kind and
// name (docs/api.md, "Children").
var specChildren = []kindRef{
	{"ConfigMap", "v1", "{promocion}-html"},
	{"Deployment", "apps/v1", "{promocion}"},
	{"Service", "v1", "{promocion}"},
}

type kindRef struct{ Kind, APIVersion, Name string }

// promo is what the facts are stated about: one Promocion as the user wrote it.
type promo struct {
	name, banner, uid string
	replicas          int64 // as asked for; unset is 1 (the CRD's default, README)
	page              string
}

// A fact is one thing a child must hold: at path (segments; "x[k=v]" picks
// the element of the list x whose k is v), the value want(p) (a string,
// compared as fmt.Sprint prints it), or, when want returns a matcher, what it
// accepts.
type fact struct {
	kind, what string
	path       []string
	want       func(p promo) any
}

type matcher struct {
	says string
	ok   func(got any, found bool) bool
}

func at(path ...string) []string { return path }

// labels are on every child and on the pods (docs/api.md, "Children").
func labels(p promo) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "promocion",
		"app.kubernetes.io/instance":   p.name,
		"app.kubernetes.io/managed-by": "operador-promociones",
		"tienda.example.com/promocion": p.name,
	}
}

const web = "containers[name=web]"

// facts: the children of a Promocion, as docs/api.md ("What each child
// holds") states them, a line here for each of its statements.
var facts = func() []fact {
	var all []fact
	for _, k := range specChildren {
		for key := range labels(promo{}) {
			all = append(all, fact{k.Kind, "the label " + key, at("metadata", "labels", key), func(p promo) any { return labels(p)[key] }})
		}
		all = append(all, fact{k.Kind, "a controller ownerReference to its Promocion", at("metadata", "ownerReferences[controller=true]"), func(p promo) any {
			return matcher{"Promocion " + p.name + " with its UID", func(got any, found bool) bool {
				ref, _ := got.(map[string]any)
				return found && ref["kind"] == "Promocion" && ref["apiVersion"] == "tienda.example.com/v1" && ref["name"] == p.name && ref["uid"] == p.uid
			}}
		}})
	}
	tpl := func(path ...string) []string { return append([]string{"spec", "template", "spec"}, path...) }
	return append(all,
		// The page: the banner as a heading, HTML-escaped (it is user input).
		fact{"ConfigMap", "the page shows the banner escaped, as its heading", at("data", "index.html"), func(p promo) any {
			escaped := html.EscapeString(p.banner)
			return matcher{"<h1>" + escaped + "</h1>, and the banner nowhere unescaped", func(got any, found bool) bool {
				s, _ := got.(string)
				return strings.Contains(s, "<h1>"+escaped+"</h1>") && (escaped == p.banner || !strings.Contains(s, p.banner))
			}}
		}},
		fact{"Deployment", "the replicas asked for (unset is 1)", at("spec", "replicas"), func(p promo) any { return p.replicas }},
		fact{"Deployment", "a selector of the Promocion's label alone", at("spec", "selector"), func(p promo) any {
			return map[string]any{"matchLabels": map[string]any{"tienda.example.com/promocion": p.name}}
		}},
		fact{"Deployment", "the pods labelled as the children", at("spec", "template", "metadata", "labels"), func(p promo) any {
			return matcher{fmt.Sprint(labels(p)), func(got any, _ bool) bool { return hasAll(got, labels(p)) }}
		}},
		fact{"Deployment", "the page's SHA-256 on the pod template (a new banner rolls the pods)", at("spec", "template", "metadata", "annotations", "tienda.example.com/pagina-sha256"),
			func(p promo) any { sum := sha256.Sum256([]byte(p.page)); return hex.EncodeToString(sum[:]) }},
		fact{"Deployment", "the web image", tpl(web, "image"), func(promo) any { return oracleImage }},
		fact{"Deployment", "port 8080, named http", tpl(web, "ports[name=http]", "containerPort"), func(promo) any { return int64(8080) }},
		fact{"Deployment", "ready when it serves / on http", tpl(web, "readinessProbe", "httpGet"), func(promo) any {
			return map[string]any{"path": "/", "port": "http", "scheme": "HTTP"}
		}},
		fact{"Deployment", "the page mounted where nginx serves it", tpl(web, "volumeMounts[name=html]", "mountPath"), func(promo) any { return "/usr/share/nginx/html" }},
		fact{"Deployment", "the page mounted read-only", tpl(web, "volumeMounts[name=html]", "readOnly"), func(promo) any { return true }},
		fact{"Deployment", "the page from the ConfigMap", tpl("volumes[name=html]", "configMap", "name"), func(p promo) any { return p.name + "-html" }},
		fact{"Deployment", "an emptyDir on /tmp", tpl(web, "volumeMounts[name=tmp]", "mountPath"), func(promo) any { return "/tmp" }},
		fact{"Deployment", "the /tmp volume an emptyDir", tpl("volumes[name=tmp]", "emptyDir"), func(promo) any { return map[string]any{} }},
		fact{"Deployment", "no API token for the pods", tpl("automountServiceAccountToken"), func(promo) any { return false }},
		fact{"Deployment", "non-root", tpl("securityContext", "runAsNonRoot"), func(promo) any { return true }},
		fact{"Deployment", "seccomp RuntimeDefault", tpl("securityContext", "seccompProfile", "type"), func(promo) any { return "RuntimeDefault" }},
		fact{"Deployment", "no privilege escalation", tpl(web, "securityContext", "allowPrivilegeEscalation"), func(promo) any { return false }},
		fact{"Deployment", "a read-only root filesystem", tpl(web, "securityContext", "readOnlyRootFilesystem"), func(promo) any { return true }},
		fact{"Deployment", "every capability dropped", tpl(web, "securityContext", "capabilities", "drop"), func(promo) any { return []any{"ALL"} }},
		fact{"Deployment", "requests of 10m CPU and 16Mi", tpl(web, "resources", "requests"), func(promo) any { return map[string]any{"cpu": "10m", "memory": "16Mi"} }},
		fact{"Deployment", "a memory limit of 64Mi", tpl(web, "resources", "limits"), func(promo) any { return map[string]any{"memory": "64Mi"} }},
		fact{"Service", "a selector of the Promocion's label alone", at("spec", "selector"), func(p promo) any {
			return map[string]any{"tienda.example.com/promocion": p.name}
		}},
		fact{"Service", "port 80, named http, to the pods' http", at("spec", "ports[name=http]"), func(promo) any {
			return map[string]any{"name": "http", "port": int64(80), "protocol": "TCP", "targetPort": "http"}
		}},
	)
}()

// oracleImage is the web image the facts expect: the operator's default
// (README: --web-image), which every test here runs with.
const oracleImage = WebImage

// Problem is one way a namespace differs from the facts. Never is true for
// what must not be seen at any moment, converged or not (a Promocion Listo
// while its own status counts fewer ready replicas than it asks for); the
// rest is what the world must reach.
type Problem struct {
	Text  string
	Never bool
}

func (p Problem) String() string { return p.Text }

// Judge lists how ns differs from the facts, read through c.
func Judge(ctx context.Context, c client.Client, ns string) ([]Problem, error) {
	list := func(apiVersion, kind string) ([]unstructured.Unstructured, error) {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(apiVersion)
		l.SetKind(kind + "List")
		err := c.List(ctx, l, client.InNamespace(ns))
		return l.Items, err
	}
	world := map[string][]unstructured.Unstructured{}
	for _, k := range append(slices.Clone(specChildren), kindRef{"Promocion", "tienda.example.com/v1", ""}, kindRef{"ReplicaSet", "apps/v1", ""}, kindRef{"Pod", "v1", ""},
		kindRef{"EndpointSlice", "discovery.k8s.io/v1", ""}) {
		items, err := list(k.APIVersion, k.Kind)
		if err != nil {
			return nil, err
		}
		world[k.Kind] = items
	}
	return judge(world), nil
}

func judge(world map[string][]unstructured.Unstructured) []Problem {
	var problems []Problem
	bad := func(never bool, format string, args ...any) {
		problems = append(problems, Problem{fmt.Sprintf(format, args...), never})
	}
	find := func(kind, name string) *unstructured.Unstructured {
		for i := range world[kind] {
			if world[kind][i].GetName() == name {
				return &world[kind][i]
			}
		}
		return nil
	}
	expected := map[string]bool{}
	for _, pr := range world["Promocion"] {
		name := pr.GetName()
		if pr.GetDeletionTimestamp() != nil {
			bad(false, "Promocion %s is Terminating", name)
			continue
		}
		p := promo{name: name, uid: string(pr.GetUID()), replicas: 1}
		p.banner, _, _ = unstructured.NestedString(pr.Object, "spec", "banner")
		if r, found, _ := unstructured.NestedInt64(pr.Object, "spec", "replicas"); found {
			p.replicas = r
		}
		if cm := find("ConfigMap", name+"-html"); cm != nil {
			p.page, _, _ = unstructured.NestedString(cm.Object, "data", "index.html")
		}
		for _, k := range specChildren {
			childName := strings.ReplaceAll(k.Name, "{promocion}", name)
			expected[k.Kind+"/"+childName] = true
			child := find(k.Kind, childName)
			if child == nil {
				bad(false, "%s %s is missing", k.Kind, childName)
				continue
			}
			for _, f := range facts {
				if f.kind != k.Kind {
					continue
				}
				got, found := lookup(child.Object, f.path)
				if !holds(f.want(p), got, found) {
					bad(false, "%s %s: want %s (%s), got %s", k.Kind, childName, f.what, says(f.want(p)), shown(got, found))
				}
			}
		}
		problems = append(problems, judgeStatus(pr, p, find("Deployment", name))...)
	}
	// Nothing of the operator's without its Promocion, and nothing stuck.
	for _, k := range specChildren {
		for _, o := range world[k.Kind] {
			ref, hasRef := lookup(o.Object, at("metadata", "ownerReferences[controller=true]"))
			refKind, _ := ref.(map[string]any)
			mine := hasRef && refKind["kind"] == "Promocion" || !hasRef && o.GetLabels()["app.kubernetes.io/managed-by"] == "operador-promociones"
			if mine && !expected[k.Kind+"/"+o.GetName()] {
				bad(false, "%s %s belongs to no Promocion", k.Kind, o.GetName())
			}
			if o.GetDeletionTimestamp() != nil {
				bad(false, "%s %s is Terminating", k.Kind, o.GetName())
			}
		}
	}
	// The Deployment controller's part: one ReplicaSet with pods wanted, on
	// the latest template, and none outliving its Deployment.
	active := map[string]int{}
	for _, rs := range world["ReplicaSet"] {
		ref, _ := lookup(rs.Object, at("metadata", "ownerReferences[controller=true]"))
		refMap, _ := ref.(map[string]any)
		refName, _ := refMap["name"].(string)
		d := find("Deployment", refName)
		want, _, _ := unstructured.NestedInt64(rs.Object, "spec", "replicas")
		switch {
		case d == nil || string(d.GetUID()) != refMap["uid"]:
			bad(false, "ReplicaSet %s outlives its Deployment", rs.GetName())
		case want > 0:
			active[d.GetName()]++
			rsAnn, _, _ := unstructured.NestedStringMap(rs.Object, "spec", "template", "metadata", "annotations")
			dAnn, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations")
			if fmt.Sprint(rsAnn) != fmt.Sprint(dAnn) {
				bad(false, "ReplicaSet %s runs an old pod template of %s", rs.GetName(), d.GetName())
			}
		}
	}
	for name, n := range active {
		if n > 1 {
			bad(false, "Deployment %s has %d ReplicaSets with pods wanted", name, n)
		}
	}
	for _, pod := range world["Pod"] {
		if pod.GetDeletionTimestamp() != nil {
			bad(false, "Pod %s is Terminating", pod.GetName())
		}
	}
	// The Service sends users only to the pods of its Promocion's Deployment:
	// never to those of a ReplicaSet that outlived an earlier Deployment of
	// the name, which carry the same labels.
	for _, es := range world["EndpointSlice"] {
		svc := es.GetLabels()["kubernetes.io/service-name"]
		d := find("Deployment", svc)
		if d == nil || find("Promocion", svc) == nil {
			continue
		}
		endpoints, _, _ := unstructured.NestedSlice(es.Object, "endpoints")
		for _, e := range endpoints {
			m, _ := e.(map[string]any)
			ready, _, _ := unstructured.NestedBool(m, "conditions", "ready")
			kind, _, _ := unstructured.NestedString(m, "targetRef", "kind")
			podName, _, _ := unstructured.NestedString(m, "targetRef", "name")
			pod := find("Pod", podName)
			if !ready || kind != "Pod" || pod == nil {
				continue
			}
			ref, _ := lookup(pod.Object, at("metadata", "ownerReferences[controller=true]"))
			refMap, _ := ref.(map[string]any)
			rsName, _ := refMap["name"].(string)
			rs := find("ReplicaSet", rsName)
			var rsOwner any
			if rs != nil {
				rsOwner, _ = lookup(rs.Object, at("metadata", "ownerReferences[controller=true]", "uid"))
			}
			switch {
			case rs == nil:
				bad(false, "Service %s sends users to pod %s, of ReplicaSet %s, which is not its Deployment's", svc, podName, rsName)
			case fmt.Sprint(rsOwner) != string(d.GetUID()):
				// The garbage collector's to remove, as the ReplicaSet is: the
				// suffix files it with the ReplicaSets of deleted Deployments.
				bad(false, "Service %s sends users to pod %s, of ReplicaSet %s, which is not its Deployment's: a ReplicaSet that outlives its Deployment", svc, podName, rsName)
			}
		}
	}
	return problems
}

// judgeStatus: the Listo rule of the README and the lesson. Listo means every
// replica asked for is ready and runs the latest spec; the status says which
// generation it describes. At the end: Listo, for the current generation,
// with the Deployment's counts.
func judgeStatus(pr unstructured.Unstructured, p promo, d *unstructured.Unstructured) []Problem {
	var problems []Problem
	st := func(f string) int64 { v, _, _ := unstructured.NestedInt64(pr.Object, "status", f); return v }
	fase, _, _ := unstructured.NestedString(pr.Object, "status", "fase")
	line := fmt.Sprintf("%q with %d of %d ready, for generation %d of %d", fase, st("readyReplicas"), st("replicas"), st("observedGeneration"), pr.GetGeneration())
	if text, bad := TooSoon(&pr); bad {
		problems = append(problems, Problem{text, true})
	}
	var ready, replicas int64
	if d != nil {
		ready, _, _ = unstructured.NestedInt64(d.Object, "status", "readyReplicas")
		replicas, _, _ = unstructured.NestedInt64(d.Object, "status", "replicas")
	}
	if fase != "Listo" || st("observedGeneration") != pr.GetGeneration() || st("readyReplicas") != ready || st("replicas") != replicas || ready != p.replicas {
		problems = append(problems, Problem{fmt.Sprintf("Promocion %s is %s; want Listo with %d of %d ready (its Deployment's %d of %d), for generation %d",
			p.name, line, p.replicas, p.replicas, ready, replicas, pr.GetGeneration()), false})
	}
	// docs/api.md, the status and the conditions, once Listo and applied.
	if sel, _, _ := unstructured.NestedString(pr.Object, "status", "selector"); sel != "tienda.example.com/promocion="+p.name {
		problems = append(problems, Problem{fmt.Sprintf("Promocion %s: want status.selector tienda.example.com/promocion=%s (the scale subresource), got %q", p.name, p.name, sel), false})
	}
	for _, want := range []struct{ typ, status, reason string }{
		{"Ready", "True", "AllReplicasReady"}, {"Progressing", "False", "Complete"}, {"Degraded", "False", "AsExpected"}, {"Reconciling", "", ""}, {"Stalled", "", ""},
	} {
		c := Condition(&pr, want.typ)
		switch {
		case want.status == "" && c != nil:
			problems = append(problems, Problem{fmt.Sprintf("Promocion %s: want no condition %s once Listo (kstatus's, present only while true), got %v", p.name, want.typ, c), false})
		case want.status == "":
		case c == nil || c["status"] != want.status || c["reason"] != want.reason || fmt.Sprint(c["observedGeneration"]) != fmt.Sprint(pr.GetGeneration()):
			problems = append(problems, Problem{fmt.Sprintf("Promocion %s: want condition %s %s (%s) for generation %d, got %v", p.name, want.typ, want.status, want.reason, pr.GetGeneration(), c), false})
		}
	}
	return problems
}

// Condition is a Promocion's status condition of that type, or nil.
func Condition(pr *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(pr.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// TooSoon says what must never be seen in a Promocion as it is at one moment:
// Listo, for its current generation, with fewer ready replicas (or more or
// fewer replicas) than it asks for; or a status that contradicts itself
// (docs/api.md: the fase, Ready, Progressing, Degraded, and kstatus's
// Reconciling and Stalled, present only while true).
func TooSoon(pr *unstructured.Unstructured) (string, bool) {
	if text, bad := tooSoonListo(pr); bad {
		return text, bad
	}
	return contradicts(pr)
}

// contradicts says how a status written for the Promocion's current
// generation contradicts itself, if it does.
func contradicts(pr *unstructured.Unstructured) (string, bool) {
	fase, _, _ := unstructured.NestedString(pr.Object, "status", "fase")
	observed, _, _ := unstructured.NestedInt64(pr.Object, "status", "observedGeneration")
	if fase == "" || observed != pr.GetGeneration() {
		return "", false // not written yet, or for an older generation
	}
	is := func(typ, status string) bool { c := Condition(pr, typ); return c != nil && c["status"] == status }
	present := func(typ string) bool { return Condition(pr, typ) != nil }
	name := pr.GetName()
	switch {
	case fase != "Listo" && fase != "Desplegando":
		return fmt.Sprintf("Promocion %s says fase %q: only Desplegando or Listo", name, fase), true
	case is("Ready", "True") && fase != "Listo":
		return fmt.Sprintf("Promocion %s is Ready and %s", name, fase), true
	case fase == "Listo" && is("Degraded", "False") && !is("Ready", "True"):
		return fmt.Sprintf("Promocion %s is Listo, not Degraded, and not Ready", name), true
	case (fase == "Desplegando") != is("Progressing", "True"):
		return fmt.Sprintf("Promocion %s is %s with Progressing %v", name, fase, Condition(pr, "Progressing")), true
	case present("Stalled") != is("Degraded", "True"):
		return fmt.Sprintf("Promocion %s has Stalled %v with Degraded %v", name, Condition(pr, "Stalled"), Condition(pr, "Degraded")), true
	case present("Reconciling") != (is("Degraded", "False") && is("Progressing", "True")):
		return fmt.Sprintf("Promocion %s has Reconciling %v with Degraded %v and Progressing %v", name, Condition(pr, "Reconciling"), Condition(pr, "Degraded"), Condition(pr, "Progressing")), true
	}
	return "", false
}

func tooSoonListo(pr *unstructured.Unstructured) (string, bool) {
	fase, _, _ := unstructured.NestedString(pr.Object, "status", "fase")
	observed, _, _ := unstructured.NestedInt64(pr.Object, "status", "observedGeneration")
	ready, _, _ := unstructured.NestedInt64(pr.Object, "status", "readyReplicas")
	replicas, _, _ := unstructured.NestedInt64(pr.Object, "status", "replicas")
	want := int64(1)
	if r, found, _ := unstructured.NestedInt64(pr.Object, "spec", "replicas"); found {
		want = r
	}
	if fase == "Listo" && observed == pr.GetGeneration() && (ready != want || replicas != want) {
		return fmt.Sprintf("Promocion %s says Listo with %d of %d replicas ready, asking for %d", pr.GetName(), ready, replicas, want), true
	}
	return "", false
}

var pick = regexp.MustCompile(`^(\w+)\[(\w+)=([\w-]+)\]$`)

// lookup follows path in obj.
func lookup(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, seg := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		sel := pick.FindStringSubmatch(seg)
		if sel == nil {
			if cur, ok = m[seg]; !ok {
				return nil, false
			}
			continue
		}
		items, _ := m[sel[1]].([]any)
		cur, ok = nil, false
		for _, it := range items {
			if e, _ := it.(map[string]any); e != nil && fmt.Sprint(e[sel[2]]) == sel[3] {
				cur, ok = e, true
				break
			}
		}
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func holds(want, got any, found bool) bool {
	if m, ok := want.(matcher); ok {
		return m.ok(got, found)
	}
	return found && fmt.Sprint(got) == fmt.Sprint(want)
}

func says(want any) string {
	if m, ok := want.(matcher); ok {
		return m.says
	}
	return fmt.Sprint(want)
}

func shown(got any, found bool) string {
	if !found {
		return "nothing"
	}
	s := fmt.Sprint(got)
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func hasAll(got any, want map[string]string) bool {
	m, _ := got.(map[string]any)
	for k, v := range want {
		if m[k] != v {
			return false
		}
	}
	return true
}

// checkChildTable fails if the operator makes a kind of child, or names one,
// otherwise than the facts say (its -children table against specChildren).
func checkChildTable(operator []Child) error {
	var theirs, ours []string
	for _, c := range operator {
		theirs = append(theirs, c.Kind+" "+c.APIVersion+" "+c.name)
	}
	for _, c := range specChildren {
		ours = append(ours, c.Kind+" "+c.APIVersion+" "+c.Name)
	}
	if !slices.Equal(theirs, ours) {
		return fmt.Errorf("the operator makes %q, and the oracle's facts (e2e/framework/oracle.go) cover %q: add the facts of the new kind", theirs, ours)
	}
	return nil
}
