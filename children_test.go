package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

func promocion(name, banner string, replicas *int32) *Promocion {
	return &Promocion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Generation: 1},
		Spec:       PromocionSpec{Banner: banner, Replicas: replicas},
	}
}

func TestPageEscapesBanner(t *testing.T) {
	for _, tc := range []struct {
		banner, want, never string
	}{
		{"https://tienda.example.com", "<h1>https://tienda.example.com</h1>", ""},
		{"<script>alert(1)</script>", "<h1>&lt;script&gt;alert(1)&lt;/script&gt;</h1>", "<script>"},
		{`"><img src=x onerror=alert(1)>`, "<h1>&#34;&gt;&lt;img src=x onerror=alert(1)&gt;</h1>", "<img"},
		{"Tom & Jerry's", "<h1>Tom &amp; Jerry&#39;s</h1>", ""},
		{"¡Rebajas! 🎉 שלום", "<h1>¡Rebajas! 🎉 שלום</h1>", ""},
	} {
		page := Page(promocion("p", tc.banner, nil))
		if !strings.Contains(page, tc.want) {
			t.Errorf("banner %q: page lacks %q:\n%s", tc.banner, tc.want, page)
		}
		if tc.never != "" && strings.Contains(page, tc.never) {
			t.Errorf("banner %q: page holds markup %q:\n%s", tc.banner, tc.never, page)
		}
	}
}

func TestMutateOnEmptyObjects(t *testing.T) {
	for _, tc := range []struct {
		replicas *int32
		want     int32
	}{{nil, DefaultReplicas}, {new(int32(0)), 0}, {new(int32(3)), 3}} {
		p := promocion("rebajas-verano", "hola", tc.replicas)

		var cm corev1.ConfigMap
		mutateConfigMap(&cm, p)
		if cm.Data[pageKey] != Page(p) || cm.Labels[LabelPromocion] != p.Name {
			t.Errorf("ConfigMap: %+v", cm)
		}

		var d appsv1.Deployment
		mutateDeployment(&d, p, "web:1")
		if got := *d.Spec.Replicas; got != tc.want {
			t.Errorf("replicas %v: Deployment has %d, want %d", tc.replicas, got, tc.want)
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("selector %v does not match template labels %v (%v)", d.Spec.Selector, d.Spec.Template.Labels, err)
		}
		pod := d.Spec.Template.Spec
		if len(pod.Containers) != 1 || pod.Containers[0].Image != "web:1" || pod.Containers[0].Ports[0].ContainerPort != webPort {
			t.Errorf("containers: %+v", pod.Containers)
		}
		if v := pod.Volumes[0]; v.Name != htmlVolume || v.ConfigMap == nil || v.ConfigMap.Name != "rebajas-verano-html" {
			t.Errorf("volumes: %+v", pod.Volumes)
		}
		web := pod.Containers[0]
		if sc := pod.SecurityContext; sc == nil || !*sc.RunAsNonRoot || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
			!*web.SecurityContext.ReadOnlyRootFilesystem || *web.SecurityContext.AllowPrivilegeEscalation ||
			fmt.Sprint(web.SecurityContext.Capabilities.Drop) != "[ALL]" {
			t.Errorf("the pods are not restricted: pod %+v, container %+v", pod.SecurityContext, web.SecurityContext)
		}
		if a := pod.AutomountServiceAccountToken; a == nil || *a {
			t.Errorf("the pods get an API token: automountServiceAccountToken %v", a)
		}
		if d.Spec.Template.Annotations[AnnotationPageHash] != pageHash(Page(p)) {
			t.Errorf("page hash annotation: %v", d.Spec.Template.Annotations)
		}

		var s corev1.Service
		mutateService(&s, p)
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Service selector %v does not select the pods %v", s.Spec.Selector, d.Spec.Template.Labels)
		}
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 80 || s.Spec.Ports[0].TargetPort != intstr.FromString(webPortName) {
			t.Errorf("Service ports: %+v", s.Spec.Ports)
		}
	}
}

// Objects as the API server returns them: defaulted fields, and additions by
// other people and tools. The mutate functions must keep all of it, and change
// nothing on an object that is already right.
func TestMutateKeepsWhatItDoesNotOwn(t *testing.T) {
	p := promocion("rebajas-verano", "hola", new(int32(3)))
	created := metav1.NewTime(time.Unix(1, 0))

	cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created, Labels: map[string]string{"equipo": "marketing"}},
		Data: map[string]string{"extra.css": "h1{}"}}
	mutateConfigMap(&cm, p)
	assertIdempotent(t, &cm, func() { mutateConfigMap(&cm, p) })
	if cm.Labels["equipo"] != "marketing" || cm.Data["extra.css"] != "h1{}" {
		t.Errorf("ConfigMap lost what it did not own: %+v", cm)
	}

	foreignSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"old": "selector"}}
	d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Spec: appsv1.DeploymentSpec{
		Selector:             foreignSelector,
		RevisionHistoryLimit: new(int32(10)),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{
				{Name: "sidecar", Image: "proxy:1"},
				{Name: webContainer, Image: "old:0", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log"},
			},
		}},
	}}
	mutateDeployment(&d, p, "web:1")
	assertIdempotent(t, &d, func() { mutateDeployment(&d, p, "web:1") })
	if d.Spec.Selector != foreignSelector {
		t.Errorf("the selector of an existing Deployment is immutable and must be left alone, got %v", d.Spec.Selector)
	}
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 2 || cs[0].Name != "sidecar" || cs[1].Image != "web:1" || cs[1].ImagePullPolicy != corev1.PullIfNotPresent ||
		cs[1].TerminationMessagePath == "" || *d.Spec.RevisionHistoryLimit != 10 || d.Spec.Template.Spec.RestartPolicy == "" {
		t.Errorf("Deployment lost defaulted or foreign fields: %+v", d.Spec)
	}

	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.7",
		Ports: []corev1.ServicePort{{Name: webPortName, Port: 80, NodePort: 30080}},
	}}
	mutateService(&s, p)
	assertIdempotent(t, &s, func() { mutateService(&s, p) })
	if s.Spec.ClusterIP != "10.0.0.7" || s.Spec.Ports[0].NodePort != 30080 || s.Spec.Type != corev1.ServiceTypeNodePort {
		t.Errorf("Service lost defaulted or foreign fields: %+v", s.Spec)
	}
}

func assertIdempotent[T interface{ DeepCopy() T }](t *testing.T, obj T, mutateAgain func()) {
	t.Helper()
	before := obj.DeepCopy()
	mutateAgain()
	if !equality.Semantic.DeepEqual(before, obj) {
		t.Errorf("a second mutate changed %T: it would write on every reconcile", obj)
	}
}

func TestDescribeChanges(t *testing.T) {
	for _, tc := range []struct {
		changes      []childChange
		reason, note string
	}{
		{[]childChange{{true, "ConfigMap", "a-html"}, {true, "Deployment", "a"}, {true, "Service", "a"}},
			"Created", "Created ConfigMap a-html, Deployment a and Service a"},
		{[]childChange{{false, "Deployment", "a"}}, "Updated", "Updated Deployment a"},
		{[]childChange{{false, "ConfigMap", "a-html"}, {false, "Deployment", "a"}}, "Updated", "Updated ConfigMap a-html and Deployment a"},
		{[]childChange{{false, "Deployment", "a"}, {true, "Service", "a"}}, "Updated", "Created Service a; updated Deployment a"},
	} {
		reason, note := describeChanges(tc.changes)
		if reason != tc.reason || note != tc.note {
			t.Errorf("describeChanges(%v) = %q, %q; want %q, %q", tc.changes, reason, note, tc.reason, tc.note)
		}
	}
}

func TestNamespaceGoing(t *testing.T) {
	// What the NamespaceLifecycle admission plugin answers a create in a
	// namespace being deleted.
	refused := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x-html",
		errors.New("unable to create new content in namespace tienda because it is being terminated"))
	refused.ErrStatus.Details.Causes = append(refused.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"})
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "x-html", errors.New("changed"))
	// What it answers a create in a namespace that is gone.
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "tienda")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{fmt.Errorf("ConfigMap x-html: %w", refused), true},
		{errors.Join(errors.New("other"), fmt.Errorf("Service x: %w", refused)), true},
		// errors.As would stop at the conflict, the first status in the join.
		{errors.Join(fmt.Errorf("ConfigMap x-html: %w", conflict), fmt.Errorf("Service x: %w", refused)), true},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x-html", errors.New("RBAC says no")), false},
		{fmt.Errorf("ConfigMap x-html: %w", gone), true},
		{apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x-html"), false},
		{conflict, false},
		{nil, false},
	} {
		if got := some(tc.err, namespaceGoing); got != tc.want {
			t.Errorf("some(%v, namespaceGoing) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Only a failure made of conflicts alone is the routine kind, requeued quietly.
func TestOnlyConflicts(t *testing.T) {
	conflict := func(name string) error {
		return fmt.Errorf("ConfigMap %s: %w", name, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, name, errors.New("changed")))
	}
	forbidden := fmt.Errorf("Deployment x: %w", apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "x", errors.New("RBAC says no")))
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{conflict("a"), true},
		{errors.Join(conflict("a"), conflict("b")), true},
		{fmt.Errorf("status: %w", errors.Join(conflict("a"), nil, conflict("b"))), true},
		{errors.Join(conflict("a"), forbidden), false}, // apierrors.IsConflict says true here
		{errors.Join(forbidden, conflict("a")), false},
		{forbidden, false},
		{errors.New("boom"), false},
		{nil, false},
	} {
		if got := onlyConflicts(tc.err); got != tc.want {
			t.Errorf("onlyConflicts(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// An object with a child's name is the operator's to write only when it made
// it for a Promocion of this name: controlled by this Promocion, or an orphan
// with the operator's labels for the name. Anything else is someone else's.
func TestClaim(t *testing.T) {
	p := promocion("pagos", "hola", nil)
	p.UID = "uid-actual"
	ours := map[string]string{LabelManagedBy: operatorName, LabelPromocion: "pagos"}
	controller := func(apiVersion, kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: new(true)}}
	}
	this := controller("tienda.example.com/v1", "Promocion", "pagos", "uid-actual")
	before := controller("tienda.example.com/v1", "Promocion", "pagos", "uid-anterior") // deleted, then made again
	const (
		mayWrite     = ""
		exists       = "ChildExists"
		ownedByOther = "ChildOwnedByOther"
	)
	for _, tc := range []struct {
		name   string
		uid    string // "" for an object not in the cluster
		labels map[string]string
		owners []metav1.OwnerReference
		want   string
	}{
		{"not made yet", "", nil, nil, mayWrite},
		{"controlled by this Promocion", "u", ours, this, mayWrite},
		{"controlled by this Promocion, its labels removed", "u", nil, this, mayWrite},
		{"the operator's orphan of this name (--cascade=orphan)", "u", ours, nil, mayWrite},
		{"the operator's, of a Promocion of this name deleted since", "u", ours, before, mayWrite},
		{"the operator's orphan, beside someone's owner that is not a controller", "u", ours,
			[]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "x"}}, mayWrite},
		{"a team's object: no owner, no labels", "u", map[string]string{"app": "pagos"}, nil, exists},
		{"of a Promocion of this name deleted since, without the labels", "u", nil, before, exists},
		{"the operator's labels for another Promocion", "u", map[string]string{LabelManagedBy: operatorName, LabelPromocion: "otra"}, nil, exists},
		{"this Promocion's label, not the operator's", "u", map[string]string{LabelManagedBy: "helm", LabelPromocion: "pagos"}, nil, exists},
		{"the operator's label alone", "u", map[string]string{LabelManagedBy: operatorName}, nil, exists},
		{"controlled by a ConfigMap", "u", ours, controller("v1", "ConfigMap", "otro-dueno", "c"), ownedByOther},
		{"controlled by another Promocion", "u", ours, controller("tienda.example.com/v1", "Promocion", "otra", "o"), ownedByOther},
		{"controlled by a Promocion of another API group", "u", ours, controller("otra.example.com/v1", "Promocion", "pagos", "g"), ownedByOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "pagos", Namespace: "default", UID: types.UID(tc.uid),
				Labels: tc.labels, OwnerReferences: tc.owners}}
			err := claim(svc, "Service", p)
			got, msg := mayWrite, ""
			if err != nil {
				got, msg = explainApplyError(fmt.Errorf("Service pagos: %w", err))
			}
			if got != tc.want {
				t.Errorf("claim: %v (%s), want %q", err, got, tc.want)
			}
			if got == exists && msg != "Service pagos already exists and was not made by the operator for this Promocion; "+
				"the operator leaves it untouched. Give the Promocion another name, or delete that object if it is not needed" {
				t.Errorf("message %q", msg)
			}
		})
	}
}

// A write waits for the Promocion to be read past the cache only where the
// cache being behind its deletion would make it wrong: taking back what it does
// not control yet, and making anew a child it had. New Promociones and their
// own children cost no read.
func TestNeedsLiveOwner(t *testing.T) {
	p := promocion("pagos", "hola", nil)
	p.UID = "uid-actual"
	reconciled := p.DeepCopy()
	reconciled.Status.ObservedGeneration = 1
	controlledBy := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "tienda.example.com/v1", Kind: "Promocion", Name: "pagos", UID: uid, Controller: new(true)}}
	}
	for _, tc := range []struct {
		name   string
		promo  *Promocion
		uid    types.UID // "" for an object not in the cluster
		owners []metav1.OwnerReference
		want   bool
	}{
		{"a new Promocion's first child", p, "", nil, false},
		{"a child missing since the Promocion was reconciled", reconciled, "", nil, true},
		{"its own child", reconciled, "u", controlledBy(p.UID), false},
		{"its own child, before its first status", p, "u", controlledBy(p.UID), false},
		{"an orphan of the operator's", p, "u", nil, true},
		{"a child of an earlier Promocion of the name", reconciled, "u", controlledBy("uid-anterior"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "pagos", UID: tc.uid, OwnerReferences: tc.owners}}
			if got := needsLiveOwner(svc, tc.promo); got != tc.want {
				t.Errorf("needsLiveOwner = %v, want %v", got, tc.want)
			}
		})
	}
}

// Every kind in childKinds is wired wherever a kind must be: the cache keeps
// only the operator's objects of it, and manifiestos/rbac.yaml lets the
// operator read and write it. (Its watch is checked against a real API
// server: TestDeletedChildrenComeBack deletes a child of each kind and waits
// for it to come back; and the end-to-end suites refuse to start when their
// oracle, written from the specification, has no facts for a kind of it.) A
// kind added to the table alone fails here.
func TestEveryChildKindIsWired(t *testing.T) {
	scheme := newScheme()
	scoped := map[string]string{}
	for obj, by := range cacheByObject() {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			t.Fatal(err)
		}
		scoped[gvk.Kind] = by.Label.String()
	}
	rules := operatorRules(t)
	for _, k := range childKinds {
		t.Run(k.Kind, func(t *testing.T) {
			gvk, err := apiutil.GVKForObject(k.New(), scheme)
			if err != nil || gvk.Kind != k.Kind {
				t.Errorf("the entry %s makes a %v (%v)", k.Kind, gvk, err)
			}
			if list, err := apiutil.GVKForObject(k.NewList(), scheme); err != nil || list.Kind != k.Kind+"List" {
				t.Errorf("the entry %s lists %v (%v)", k.Kind, list, err)
			}
			if want := LabelManagedBy + "=" + operatorName; scoped[k.Kind] != want {
				t.Errorf("the cache holds %s selected by %q, want %q", k.Kind, scoped[k.Kind], want)
			}
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			if verbs := rules[plural.GroupResource()]; !verbs.HasAll("get", "list", "watch", "create", "update", "delete") {
				t.Errorf("manifiestos/rbac.yaml lets the operator %v on %s; it needs get, list, watch, create, update and delete", sets.List(verbs), plural.GroupResource())
			}
		})
	}
}

// operatorRules are the verbs that manifiestos/rbac.yaml's ClusterRole
// operador-promociones grants, by resource.
func operatorRules(t *testing.T) map[schema.GroupResource]sets.Set[string] {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("manifiestos", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := map[schema.GroupResource]sets.Set[string]{}
	for doc := range strings.SplitSeq(string(b), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind != "ClusterRole" || role.Name != operatorName {
			continue
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					gr := schema.GroupResource{Group: g, Resource: res}
					rules[gr] = rules[gr].Union(sets.New(r.Verbs...))
				}
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("no ClusterRole operador-promociones in manifiestos/rbac.yaml")
	}
	return rules
}
