package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestLesson(t *testing.T) {
	l := newLesson(t)
	l.kubectl("apply", "-f", filepath.Join(l.root, "manifiestos", "ejemplos", "rebajas-verano.yaml"))

	l.step("1", "go run . (the operator, built with go build, against the admin kubeconfig)")
	l.running = l.startOperator("admin", l.kubeconfig, "--web-image="+webImage,
		"--metrics-bind-address=127.0.0.1:18080", "--health-probe-bind-address=127.0.0.1:18081")
	l.eventually("the operator starts its watches", func() error {
		return l.running.logHas(
			`kind source: \*main.Promocion`, `kind source: \*v1.Deployment`,
			`kind source: \*v1.Service`, `kind source: \*v1.ConfigMap`, `Starting workers`)
	})
	if first := l.running.firstLine(""); !strings.Contains(first, "operador-promociones arrancando") {
		t.Errorf("the first log line is %q, want operador-promociones arrancando", first)
	}
	l.logf("the first log line says arrancando, and the four EventSources started")

	l.step("2", "the status: kubectl get promociones")
	l.waitForRow("3", "3", "Listo")
	all := l.kubectl("get", "all")
	for _, want := range []string{"deployment.apps/" + name, "service/" + name, "replicaset.apps/" + name} {
		if !strings.Contains(all, want) {
			t.Errorf("kubectl get all lacks %s:\n%s", want, all)
		}
	}
	l.kubectl("get", "configmap", name+"-html")
	l.eventually("3 pods Running", func() error {
		phases := l.kubectl("get", "pods", "-l", "tienda.example.com/promocion="+name, "-o", "jsonpath={.items[*].status.phase}")
		if phases != "Running Running Running" {
			return fmt.Errorf("pod phases %q", phases)
		}
		return nil
	})
	l.logf("%s", l.kubectl("get", "promocion", name, "-o", "jsonpath={.status}"))
	describe := l.kubectl("describe", "promocion", name)
	if want := "Created ConfigMap rebajas-verano-html, Deployment rebajas-verano and Service rebajas-verano"; !strings.Contains(describe, want) {
		t.Errorf("kubectl describe promocion lacks the event %q:\n%s", want, describe)
	}
	l.logf("kubectl describe promocion %s tells the story:\n%s", name, describe[strings.Index(describe, "Events:"):])
	for path, want := range map[string]string{
		"http://127.0.0.1:18081/healthz": "ok",
		"http://127.0.0.1:18081/readyz":  "ok",
		"http://127.0.0.1:18080/metrics": `controller_runtime_reconcile_total{controller="promocion",result="success"}`,
	} {
		if body := httpGet(t, path); !strings.Contains(body, want) {
			t.Errorf("GET %s: no %q in:\n%.500s", path, want, body)
		}
	}
	l.logf("/healthz and /readyz answer ok; /metrics counts the reconciles")

	l.step("3", "break it: kubectl delete deployment, kubectl scale")
	took := l.timeRecreation()
	l.logf("FIGURE recovery: %s from the delete request to the new Deployment's watch event", took.Round(time.Millisecond))
	l.kubectl("scale", "deployment", name, "--replicas=1")
	l.eventually("the Deployment goes back to 3 replicas", func() error {
		if r := l.kubectl("get", "deployment", name, "-o", "jsonpath={.spec.replicas}"); r != "3" {
			return fmt.Errorf("spec.replicas %s", r)
		}
		return nil
	})

	l.step("4", "inside the cluster: TestLessonInCluster runs the operator's image as Pods; here the binary goes on as its ServiceAccount")
	l.running.stop(t)

	l.step("5", "the operator as its ServiceAccount, without RBAC")
	l.kubectl("apply", "-f", filepath.Join(l.root, "manifiestos", "sa.yaml"))
	saConfig := l.serviceAccountKubeconfig("operador-promociones")
	l.kubectl("delete", "service", name) // work for it to do, once it may
	l.running = l.startOperator("serviceaccount", saConfig, "--web-image="+webImage)
	l.eventually("the API server refuses the operator", func() error {
		return l.running.logHas(`promociones.tienda.example.com is forbidden: User \\"` + regexp.QuoteMeta(sa) + `\\" cannot list`)
	})
	time.Sleep(2 * time.Second)
	if _, err := l.tryKubectl("get", "service", name); err == nil {
		t.Errorf("the Service was recreated by an operator with no permissions")
	}
	l.logf("forbidden, and the deleted Service stays deleted")

	l.step("6", "kubectl apply -f manifiestos/rbac.yaml: it reconciles, without a restart")
	l.kubectl("apply", "-f", filepath.Join(l.root, "manifiestos", "rbac.yaml"))
	l.eventually("the Service is back", func() error { _, err := l.tryKubectl("get", "service", name); return err })
	if l.running.exited() {
		t.Errorf("the operator restarted or died: %v", l.running.err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "promociones.tienda.example.com"}, "yes"},
		{[]string{"update", "promociones.tienda.example.com", "--subresource=status"}, "yes"},
		{[]string{"delete", "secrets"}, "no"},
		{[]string{"update", "promociones.tienda.example.com"}, "no"},
	} {
		args := append([]string{"auth", "can-i"}, c.args...)
		out, _ := l.tryKubectl(append(args, "--as="+sa, "-A")...) // can-i exits 1 for "no"
		if out != c.want {
			t.Errorf("kubectl auth can-i %s: %q, want %q", strings.Join(c.args, " "), out, c.want)
		}
		l.logf("kubectl auth can-i %s: %s", strings.Join(c.args, " "), out)
	}
	l.kubectl("apply", "-k", filepath.Join(l.root, "manifiestos"), "--dry-run=server") // the Kustomization holds the same files

	l.step("7", "sabotage: delete the Deployment, the Service and the ConfigMap")
	uids := l.uids()
	l.kubectl("delete", "deployment/"+name, "service/"+name, "configmap/"+name+"-html")
	l.eventually("all three are back, as new objects", func() error {
		now := l.uids()
		for kind, old := range uids {
			if now[kind] == "" || now[kind] == old {
				return fmt.Errorf("%s not recreated yet", kind)
			}
		}
		return nil
	})

	l.step("8", "the Promocion is the source of truth: replicas 5")
	watchOut := l.watchPromociones()
	l.kubectl("patch", "promocion", name, "--type=merge", "-p", `{"spec":{"replicas":5}}`)
	if row := l.row(); row[2] != "5" {
		t.Errorf("DESEADAS is %s right after the patch, want 5", row[2])
	}
	l.waitForRow("5", "5", "Listo")
	seen := watchOut()
	l.logf("kubectl get promociones -w printed:\n%s", seen)
	if !regexp.MustCompile(`(?m)^` + name + `\s+\S+\s+5\s+\d+\s+Desplegando\s`).MatchString(seen) {
		t.Errorf("FASE never showed Desplegando with DESEADAS 5")
	}
	l.kubectl("wait", "--for=condition=Ready", "promocion/"+name, "--timeout=60s")
	l.logf("kubectl wait --for=condition=Ready promocion/%s: condition met", name)

	l.step("8b", "a new banner rolls the pods, so they serve the new page at once")
	oldPods := l.kubectl("get", "pods", "-l", "tienda.example.com/promocion="+name, "-o", "jsonpath={.items[*].metadata.name}")
	l.kubectl("patch", "promocion", name, "--type=merge", "-p", `{"spec":{"banner":"Rebajas de invierno"}}`)
	l.eventually("every pod replaced by one of the new template, and Listo", func() error {
		if page := l.kubectl("get", "configmap", name+"-html", "-o", "jsonpath={.data.index\\.html}"); !strings.Contains(page, "<h1>Rebajas de invierno</h1>") {
			return fmt.Errorf("page %q", page)
		}
		pods := strings.Fields(l.kubectl("get", "pods", "-l", "tienda.example.com/promocion="+name,
			"--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}"))
		if len(pods) != 5 {
			return fmt.Errorf("%d running pods", len(pods))
		}
		for _, p := range pods {
			if strings.Contains(oldPods, p) {
				return fmt.Errorf("pod %s is from before the change", p)
			}
		}
		if f := l.kubectl("get", "promocion", name, "-o", "jsonpath={.status.fase}"); f != "Listo" {
			return fmt.Errorf("fase %s", f)
		}
		return nil
	})
	l.kubectl("patch", "promocion", name, "--type=merge", "-p", `{"spec":{"banner":"`+banner+`"}}`)
	l.waitForRow("5", "5", "Listo")

	l.step("9", "kubectl delete promocion: the garbage collector removes everything")
	l.kubectl("delete", "promocion", name)
	l.eventually("the children are gone", func() error {
		for _, args := range [][]string{
			{"deployment", name}, {"service", name}, {"configmap", name + "-html"},
			{"replicasets,pods", "-l", "tienda.example.com/promocion=" + name},
		} {
			out, err := l.tryKubectl(append([]string{"get", "-o", "name"}, args...)...)
			if err == nil && out != "" {
				return fmt.Errorf("still there: %s", out)
			}
		}
		return nil
	})
	l.assertNoDeleteInOperator()
	l.running.stop(t)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
