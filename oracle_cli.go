//go:build oracle

package main

// The reliability tests' build of the operator (go build -tags oracle):
//
//	operador-promociones -oracle NAMESPACE [WEB-IMAGE]
//
// prints, one line each, how NAMESPACE differs from what a fresh operator
// would make of it (judge, in oracle.go), and exits 1 if it does;
//
//	operador-promociones -children
//
// prints the table of childKinds, a line each: the kind, its apiVersion, its
// resource for kubectl (resource.group), and its name for the Promocion
// {promocion}. The end-to-end tests, which cannot import package main, drive
// their checks of each kind from it.

import (
	"context"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

func init() {
	switch {
	case len(os.Args) == 2 && os.Args[1] == "-children":
		for _, line := range childTable() {
			fmt.Println(line)
		}
		os.Exit(0)
	case len(os.Args) >= 3 && os.Args[1] == "-oracle":
		image := DefaultWebImage
		if len(os.Args) > 3 {
			image = os.Args[3]
		}
		problems, err := oracle(context.Background(), os.Args[2], image)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, p := range problems {
			fmt.Println(p)
		}
		if len(problems) > 0 {
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func oracle(ctx context.Context, ns, image string) ([]string, error) {
	c, err := client.New(ctrl.GetConfigOrDie(), client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, err
	}
	var (
		promos PromocionList
		rss    appsv1.ReplicaSetList
		pods   corev1.PodList
	)
	for _, l := range []client.ObjectList{&promos, &rss, &pods} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
	}
	w := world{promociones: promos.Items, children: map[string][]client.Object{}, replicaSets: rss.Items, pods: pods.Items}
	for _, k := range childKinds {
		list := k.NewList()
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			w.children[k.Kind] = append(w.children[k.Kind], o.(client.Object))
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return judge(w, image), nil
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
