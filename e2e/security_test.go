package e2e

// What docs/security.md claims, on a real cluster: a Promocion cannot take over
// what is not the operator's.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Permission to create a Promocion is not permission to take over what it is
// named after. With the garbage collector running and the operator as its
// ServiceAccount: a Promocion named kubernetes in default leaves the API
// server's own Service as it was, and deleting the Promocion deletes only what
// the operator made; and after kubectl delete promocion --cascade=orphan, a
// new Promocion of the name takes back the orphans that the garbage collector
// left, the same objects.
func TestNoTakeover(t *testing.T) {
	l := newLesson(t)
	l.identity("no-adopta")
	orphans := l.namespace("huerfanos")
	t.Cleanup(func() { _, _ = l.tryKubectl("delete", "namespace", orphans, "--wait=false") })
	o := l.start(launch{who: "no-adopta", kubeconfig: l.serviceAccountKubeconfig("no-adopta"),
		args: []string{"--namespace=default", "--namespace=" + orphans}})

	l.step("1", "a Promocion named kubernetes, in default")
	apiService := func() string {
		return l.kubectl("get", "service", "kubernetes", "-n", "default", "-o",
			"jsonpath={.metadata.uid} {.metadata.resourceVersion} {.metadata.ownerReferences} {.metadata.labels} {.spec.selector} {.spec.ports}")
	}
	before := apiService()
	l.applyYAML("kubernetes", `apiVersion: tienda.example.com/v1
kind: Promocion
metadata: {name: kubernetes, namespace: default}
spec: {banner: "no es mío", replicas: 0}
`)
	t.Cleanup(func() {
		_, _ = l.tryKubectl("delete", "--ignore-not-found", "promocion", "kubernetes", "-n", "default")
	})
	l.eventually("the Promocion reports that the Service kubernetes is not its own", func() error {
		out := l.kubectl("get", "promocion", "kubernetes", "-n", "default", "-o",
			`jsonpath={.status.conditions[?(@.type=="Degraded")].reason}: {.status.conditions[?(@.type=="Degraded")].message}`)
		if !strings.HasPrefix(out, "ChildExists: Service kubernetes already exists and was not made by the operator") {
			return fmt.Errorf("Degraded %q", out)
		}
		return nil
	})
	if describe := l.kubectl("describe", "promocion", "kubernetes", "-n", "default"); !regexp.MustCompile(`Warning\s+ChildExists`).MatchString(describe) {
		t.Errorf("kubectl describe shows no Warning ChildExists:\n%s", describe)
	}
	for _, child := range []string{"deployment/kubernetes", "configmap/kubernetes-html"} {
		if ref := l.kubectl("get", child, "-n", "default", "-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}"); ref != "Promocion/kubernetes" {
			t.Errorf("%s: owner %q, want the Promocion: the other children are still made", child, ref)
		}
	}
	if now := apiService(); now != before {
		t.Errorf("the API server's Service changed:\nbefore %s\nafter  %s", before, now)
	}
	l.logf("the Service kubernetes untouched (uid, resourceVersion, owners, labels, selector, ports); the Deployment and ConfigMap made")

	l.kubectl("delete", "promocion", "kubernetes", "-n", "default")
	l.eventually("the garbage collector deletes what the operator made", func() error {
		if out := l.kubectl("get", "deployment/kubernetes", "configmap/kubernetes-html", "-n", "default", "--ignore-not-found", "-o", "name"); out != "" {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
	if now := apiService(); now != before {
		t.Errorf("the API server's Service changed after the Promocion's deletion:\nbefore %s\nafter  %s", before, now)
	}
	l.logf("the Promocion deleted: its Deployment and ConfigMap collected, the Service kubernetes as it was")

	l.step("2", "kubectl delete promocion --cascade=orphan, then the same name again")
	l.createPromociones(orphans, 1, 1)
	l.waitListo(orphans, 1)
	children := func(jsonpath string) string {
		return l.kubectl("get", "configmap/promo-0-html", "deployment/promo-0", "service/promo-0", "-n", orphans, "-o", "jsonpath="+jsonpath)
	}
	uids := func() string { return children("{.items[*].metadata.uid}") }
	owners := func() string { return children("{range .items[*]}{.metadata.ownerReferences[0].uid} {end}") }
	made := uids()
	l.kubectl("delete", "promocion", "promo-0", "-n", orphans, "--cascade=orphan")
	if got := strings.TrimSpace(owners()); got != "" || uids() != made {
		t.Fatalf("after --cascade=orphan: children %s with owners %q, want %s with none", uids(), got, made)
	}
	l.logf("the garbage collector orphaned the children: no owner, the operator's labels")
	l.createPromociones(orphans, 1, 1)
	uid := l.kubectl("get", "promocion", "promo-0", "-n", orphans, "-o", "jsonpath={.metadata.uid}")
	l.eventually("the new Promocion controls the same children", func() error {
		if got := strings.Fields(owners()); !slices.Equal(got, []string{uid, uid, uid}) {
			return fmt.Errorf("owners %v, want %s of each", got, uid)
		}
		if now := uids(); now != made {
			return fmt.Errorf("children %s, want the orphans %s", now, made)
		}
		return nil
	})
	l.waitListo(orphans, 1)
	o.stop(t)
}

