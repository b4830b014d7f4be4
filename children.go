package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"html"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Pure functions: what each child of a Promocion should hold, and whose object
// the operator may write (status.go: what its status should say). No client
// and no clock, so the tests call them directly.
//
// The mutate functions set only the fields the operator owns, on the object read
// from the cluster, and leave alone whatever the API server defaulted or another
// tool added. Run on an object that is already right, they change nothing, so
// CreateOrUpdate sends no write.

const (
	// LabelManagedBy and LabelPromocion on a child say which operator made it,
	// and for which Promocion; LabelPromocion also selects its pods.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPromocion = "tienda.example.com/promocion"
	// AnnotationPageHash on the pod template changes with the page, so that a new
	// banner rolls the pods instead of waiting for the kubelet to refresh the volume.
	AnnotationPageHash = "tienda.example.com/pagina-sha256"

	// DefaultWebImage serves /usr/share/nginx/html on port 8080 as an unprivileged user.
	DefaultWebImage = "docker.io/nginxinc/nginx-unprivileged:1.29-alpine"

	pageKey      = "index.html"
	webContainer = "web"
	webPortName  = "http"
	webPort      = 8080
	servicePort  = 80
	htmlVolume   = "html"
	tmpVolume    = "tmp"
	htmlDir      = "/usr/share/nginx/html"
)

// childKind is a kind of object that the operator makes for every Promocion.
type childKind struct {
	Kind    string                                                 // as the API names it
	Name    func(p *Promocion) string                              // its name, from the Promocion's
	New     func() client.Object                                   // an empty one
	NewList func() client.ObjectList                               // an empty list of them
	Mutate  func(obj client.Object, p *Promocion, webImage string) // sets the fields the operator owns
}

// childKinds are the children of a Promocion, in the order they are made: the
// page before the pods that mount it. This table is the one place that names
// them: Reconcile applies each, SetupWithManager watches each (the lesson's
// Owns), the cache holds the operator's own of each and nothing else, and the
// status checks each. Adding a kind is an entry here, its mutate function, its
// rule in manifiestos/rbac.yaml (TestEveryChildKindIsWired fails if one is
// missing), and its facts in the reliability tests' oracle, which is written
// from the specification (e2e/framework/oracle.go: the suites refuse to start
// without them).
var childKinds = []childKind{
	kindOf[corev1.ConfigMap, corev1.ConfigMapList]("ConfigMap", ConfigMapName,
		func(cm *corev1.ConfigMap, p *Promocion, _ string) { mutateConfigMap(cm, p) }),
	kindOf[appsv1.Deployment, appsv1.DeploymentList]("Deployment", promocionName, mutateDeployment),
	kindOf[corev1.Service, corev1.ServiceList]("Service", promocionName,
		func(s *corev1.Service, p *Promocion, _ string) { mutateService(s, p) }),
}

// kindOf is the table entry of the kind T, listed as L, whose mutate function
// is typed.
func kindOf[T, L any, P interface {
	*T
	client.Object
}, PL interface {
	*L
	client.ObjectList
}](kind string, name func(*Promocion) string, mutate func(P, *Promocion, string)) childKind {
	return childKind{
		Kind:    kind,
		Name:    name,
		New:     func() client.Object { return P(new(T)) },
		NewList: func() client.ObjectList { return PL(new(L)) },
		Mutate:  func(obj client.Object, p *Promocion, webImage string) { mutate(obj.(P), p, webImage) },
	}
}

// ConfigMapName is the name of the ConfigMap holding a Promocion's page.
func ConfigMapName(p *Promocion) string { return p.Name + "-html" }

// promocionName names the Deployment and the Service after their Promocion.
func promocionName(p *Promocion) string { return p.Name }

// childLabels name the Promocion and the operator on every child and pod.
func childLabels(p *Promocion) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     "promocion",
		"app.kubernetes.io/instance": p.Name,
		LabelManagedBy:               operatorName,
		LabelPromocion:               p.Name,
	}
}

// selectorLabels select a Promocion's pods. A Deployment's selector is immutable,
// so it holds only what can never change.
func selectorLabels(p *Promocion) map[string]string {
	return map[string]string{LabelPromocion: p.Name}
}

// Page is the HTML served for a Promocion. The banner is escaped: it is user
// input, and a banner of <script> must reach the browser as text.
func Page(p *Promocion) string {
	b := html.EscapeString(p.Spec.Banner)
	return `<!DOCTYPE html>
<html lang="es">
<head><meta charset="utf-8"><title>` + b + `</title></head>
<body><h1>` + b + `</h1></body>
</html>
`
}

func pageHash(page string) string {
	sum := sha256.Sum256([]byte(page))
	return hex.EncodeToString(sum[:])
}

func mutateConfigMap(cm *corev1.ConfigMap, p *Promocion) {
	addLabels(&cm.ObjectMeta, childLabels(p))
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[pageKey] = Page(p)
}

func mutateDeployment(d *appsv1.Deployment, p *Promocion, image string) {
	addLabels(&d.ObjectMeta, childLabels(p))
	if d.CreationTimestamp.IsZero() {
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorLabels(p)}
	}
	d.Spec.Replicas = new(p.DesiredReplicas())

	tpl := &d.Spec.Template
	addLabels(&tpl.ObjectMeta, childLabels(p))
	metav1.SetMetaDataAnnotation(&tpl.ObjectMeta, AnnotationPageHash, pageHash(Page(p)))

	vol := byName(&tpl.Spec.Volumes, htmlVolume, func(v *corev1.Volume) *string { return &v.Name })
	vol.VolumeSource = corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(p)},
		DefaultMode:          new(int32(0o644)), // the API server's default, written out so it compares equal
	}}

	// nginx writes its pid and temporary files to /tmp; the rest of the root
	// filesystem is read-only.
	tmp := byName(&tpl.Spec.Volumes, tmpVolume, func(v *corev1.Volume) *string { return &v.Name })
	tmp.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}

	// A page server has no business with the API: its pods get no token, so
	// that a flaw in it, or in a sidecar someone adds, starts with none.
	tpl.Spec.AutomountServiceAccountToken = new(false)

	// Pod Security "restricted": the pods run in namespaces that enforce it.
	if tpl.Spec.SecurityContext == nil {
		tpl.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	tpl.Spec.SecurityContext.RunAsNonRoot = new(true)
	tpl.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}

	c := byName(&tpl.Spec.Containers, webContainer, func(c *corev1.Container) *string { return &c.Name })
	c.Image = image
	port := byName(&c.Ports, webPortName, func(p *corev1.ContainerPort) *string { return &p.Name })
	port.ContainerPort = webPort
	port.Protocol = corev1.ProtocolTCP
	mount := byName(&c.VolumeMounts, htmlVolume, func(m *corev1.VolumeMount) *string { return &m.Name })
	mount.MountPath = htmlDir
	mount.ReadOnly = true
	tmpMount := byName(&c.VolumeMounts, tmpVolume, func(m *corev1.VolumeMount) *string { return &m.Name })
	tmpMount.MountPath = "/tmp"
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	c.SecurityContext.AllowPrivilegeEscalation = new(false)
	c.SecurityContext.ReadOnlyRootFilesystem = new(true)
	c.SecurityContext.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	// Ready means serving the page. Every field is written out, defaults
	// included, so the probe compares equal to the one the API server returns.
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/", Port: intstr.FromString(webPortName), Scheme: corev1.URISchemeHTTP,
		}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
}

func mutateService(s *corev1.Service, p *Promocion) {
	addLabels(&s.ObjectMeta, childLabels(p))
	s.Spec.Selector = selectorLabels(p)
	port := byName(&s.Spec.Ports, webPortName, func(p *corev1.ServicePort) *string { return &p.Name })
	port.Port = servicePort
	port.TargetPort = intstr.FromString(webPortName)
	port.Protocol = corev1.ProtocolTCP
}

// claim tells whether the operator may write obj, an object in the cluster
// with the name of p's child of kind, and if not, why. It may when obj is not
// made yet, when p controls it (p's UID), or when it is an orphan that the
// operator made for a Promocion of p's name: it carries the operator's labels
// for that name, and no controller but a Promocion of that name, gone since
// (kubectl delete --cascade=orphan, or a delete and a recreate that came
// before the garbage collector). Anything else is someone else's, and writing
// it would lend the operator's permissions to whoever may create a Promocion:
// a Promocion named after a team's Service would take that Service over.
// docs/api.md says why the labels and the name are enough.
func claim(obj metav1.Object, kind string, p *Promocion) error {
	if obj.GetUID() == "" {
		return nil // not in the cluster: the operator makes it
	}
	ref := metav1.GetControllerOf(obj)
	if ref != nil && ref.UID == p.UID {
		return nil
	}
	if ref != nil && !samePromocion(*ref, p) {
		return &controllerutil.AlreadyOwnedError{Object: obj, Owner: *ref}
	}
	if l := obj.GetLabels(); l[LabelManagedBy] == operatorName && l[LabelPromocion] == p.Name {
		return nil
	}
	return &ChildExistsError{Kind: kind, Name: obj.GetName()}
}

// needsLiveOwner tells whether writing obj for p must wait for p to be read
// past the cache (stillLive): the write would be wrong for a Promocion that is
// gone or going, and the cache can be behind its deletion. That is so when obj
// exists and p does not control it yet (an orphan of the operator's, or a
// child of an earlier Promocion of p's name, which claim allowed): taking it
// back would hand it to the garbage collector with p. And when obj is missing
// although p had its children made (its status observed a generation): the
// garbage collector deletes them after p, and their watches may bring that to
// the operator before p's own, so a child made anew then would be made for
// nobody. New Promociones and unchanged children need no read.
func needsLiveOwner(obj metav1.Object, p *Promocion) bool {
	if obj.GetUID() == "" {
		return p.Status.ObservedGeneration > 0
	}
	ref := metav1.GetControllerOf(obj)
	return ref == nil || ref.UID != p.UID
}

// samePromocion tells whether ref names a Promocion of p's name, whatever its UID.
func samePromocion(ref metav1.OwnerReference, p *Promocion) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == GroupVersion.Group && ref.Kind == "Promocion" && ref.Name == p.Name
}

// ChildExistsError is an object with a child's name that the operator did not
// make for this Promocion: it is left as it is.
type ChildExistsError struct {
	Kind, Name string
}

func (e *ChildExistsError) Error() string { return "already exists and " + notMadeHere }

const notMadeHere = "was not made by the operator for this Promocion"

// addLabels sets the given labels and keeps any others already there.
func addLabels(m *metav1.ObjectMeta, labels map[string]string) {
	for k, v := range labels {
		metav1.SetMetaDataLabel(m, k, v)
	}
}

// byName returns the element of *list whose name is name, appending an empty one
// with that name when there is none. Callers then set only the fields they own.
func byName[T any](list *[]T, name string, nameOf func(*T) *string) *T {
	for i := range *list {
		if *nameOf(&(*list)[i]) == name {
			return &(*list)[i]
		}
	}
	var elem T
	*nameOf(&elem) = name
	*list = append(*list, elem)
	return &(*list)[len(*list)-1]
}

// namespaceGoing tells whether err is the API server's refusal to create
// anything in a namespace that is being deleted, or that is gone: a
// Promocion can outlive its namespace in the cache for a moment, and in etcd
// when the namespace's deletion ran while the API server, just restarted, did
// not serve Promociones yet (the chaos suite's outage saw it).
func namespaceGoing(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return apierrors.HasStatusCause(status.(error), corev1.NamespaceTerminatingCause) ||
		apierrors.IsNotFound(status.(error)) && details != nil && details.Kind == "namespaces"
}

// onlyConflicts tells whether err holds conflicts and nothing else. errors.As,
// and so apierrors.IsConflict, looks at the first error of a join only: a
// conflict on one child would hide a refusal on another.
func onlyConflicts(err error) bool {
	return err != nil && every(err, apierrors.IsConflict)
}

// every tells whether each error joined in err (errors.Join, or wrapped with
// %w around a join) satisfies is; some, whether one does.
func every(err error, is func(error) bool) bool {
	switch e := err.(type) { //nolint:errorlint // it walks the wrap tree itself, as errors.As does
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if !every(inner, is) {
				return false
			}
		}
		return true
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return every(inner, is)
		}
	}
	return is(err)
}

func some(err error, is func(error) bool) bool {
	return err != nil && !every(err, func(e error) bool { return !is(e) })
}

// childChange is a child that a reconcile created or updated.
type childChange struct {
	Created bool
	Kind    string
	Name    string
}

// describeChanges sums up one reconcile's changes for a single Event:
// "Created ConfigMap a, Deployment b and Service c". One Event per reconcile,
// not one per child, because every Event is a write to the API server, and a
// burst of new Promociones would otherwise spend a third of its writes on them.
func describeChanges(changes []childChange) (reason, note string) {
	var created, updated []string
	for _, c := range changes {
		if c.Created {
			created = append(created, c.Kind+" "+c.Name)
		} else {
			updated = append(updated, c.Kind+" "+c.Name)
		}
	}
	var parts []string
	if len(created) > 0 {
		parts = append(parts, "Created "+listOf(created))
	}
	if len(updated) > 0 {
		verb := "Updated "
		if len(parts) > 0 {
			verb = "updated "
		}
		parts = append(parts, verb+listOf(updated))
	}
	reason = "Created"
	if len(updated) > 0 {
		reason = "Updated"
	}
	return reason, strings.Join(parts, "; ")
}

// childKindNames are the kinds of the children, in their order.
func childKindNames() []string {
	var kinds []string
	for _, k := range childKinds {
		kinds = append(kinds, k.Kind)
	}
	return kinds
}

// listOf joins "a", "b" and "c" as "a, b and c".
func listOf(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
