package framework

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Child is a kind of object that the operator makes for every Promocion, as
// its table childKinds (children.go) says; a unit test of the operator writes
// the table into e2e/testdata/children.txt, and checks it there, since a test
// here cannot import package main.
type Child struct {
	Kind, APIVersion string
	Resource         string // for kubectl: configmaps, deployments.apps
	name             string // with {promocion} for the Promocion's name
}

// Name is the child's name for the Promocion promocion.
func (c Child) Name(promocion string) string {
	return strings.ReplaceAll(c.name, "{promocion}", promocion)
}

// Ref is the child of promocion as kubectl names it: resource/name.
func (c Child) Ref(promocion string) string { return c.Resource + "/" + c.Name(promocion) }

// Object is the child of promocion in namespace ns, to read into.
func (c Child) Object(ns, promocion string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(c.APIVersion)
	u.SetKind(c.Kind)
	u.SetNamespace(ns)
	u.SetName(c.Name(promocion))
	return u
}

// List is an empty list of the kind.
func (c Child) List() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(c.APIVersion)
	l.SetKind(c.Kind + "List")
	return l
}

// childTable is what Main read from e2e/testdata/children.txt.
var childTable []Child

// Children are the operator's children, in the order it makes them.
func Children() []Child { return childTable }

// readChildren reads the table from the file its unit test keeps
// (children_table_test.go).
func readChildren(file string) ([]Child, error) {
	out, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var all []Child
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			return nil, fmt.Errorf("%s holds %q", file, line)
		}
		all = append(all, Child{Kind: f[0], APIVersion: f[1], Resource: f[2], name: f[3]})
	}
	return all, nil
}

// ChildRefs are every child of promocion as kubectl names them.
func ChildRefs(promocion string) []string {
	var refs []string
	for _, c := range Children() {
		refs = append(refs, c.Ref(promocion))
	}
	return refs
}

// ChildResources are the children's resources, for kubectl: "configmaps,deployments.apps,services".
func ChildResources() string {
	var rs []string
	for _, c := range Children() {
		rs = append(rs, c.Resource)
	}
	return strings.Join(rs, ",")
}
