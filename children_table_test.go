package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

var update = flag.Bool("update", false, "write e2e/testdata/children.txt from childKinds")

// childTableFile is childKinds as the end-to-end tests read it, which cannot
// import package main: a line per kind, its kind, apiVersion, resource for
// kubectl (resource.group) and name for the Promocion {promocion}. Their
// checks of each kind are driven from it, and their oracle (written from
// the specification, e2e/framework/oracle.go) must cover every kind in it.
const childTableFile = "e2e/testdata/children.txt"

// The file is childKinds: a change to the table without it fails here, and
// `go test -run TestChildTableFile . -update` writes it.
func TestChildTableFile(t *testing.T) {
	s := newScheme()
	var lines []string
	for _, k := range childKinds {
		gvk, err := apiutil.GVKForObject(k.New(), s)
		if err != nil {
			t.Fatal(err)
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		name := k.Name(&Promocion{ObjectMeta: metav1.ObjectMeta{Name: "{promocion}"}})
		lines = append(lines, strings.Join([]string{k.Kind, gvk.GroupVersion().String(), plural.GroupResource().String(), name}, " "))
	}
	want := strings.Join(lines, "\n") + "\n"
	path := filepath.FromSlash(childTableFile)
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("%s is not childKinds (%v): run go test -run TestChildTableFile . -update\nwant:\n%s", childTableFile, err, want)
	}
}
