//go:build childtable

package main

// A build of the operator for the end-to-end tests (go build -tags childtable):
//
//	operador-promociones -children
//
// prints the table of childKinds, a line each: the kind, its apiVersion, its
// resource for kubectl (resource.group), and its name for the Promocion
// {promocion}. The tests, which cannot import package main, drive their
// checks of each kind from it, and fail if their oracle (written from the
// specification, e2e/framework/oracle.go) does not cover a kind of it.

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

func init() {
	if len(os.Args) == 2 && os.Args[1] == "-children" {
		for _, line := range childTable() {
			fmt.Println(line)
		}
		os.Exit(0)
	}
}

// childTable is childKinds as text.
func childTable() []string {
	var lines []string
	s := newScheme()
	for _, k := range childKinds {
		gvk, err := apiutil.GVKForObject(k.New(), s)
		if err != nil {
			panic(err)
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		resource := plural.GroupResource().String()
		name := k.Name(&Promocion{ObjectMeta: metav1.ObjectMeta{Name: "{promocion}"}})
		lines = append(lines, strings.Join([]string{k.Kind, gvk.GroupVersion().String(), resource, name}, " "))
	}
	return lines
}
