package lesson

import (
	"fmt"
	"operador-promociones/e2e/framework"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What the leader elector logs, for the Lease of the namespace lider.
const (
	acquired  = `Successfully acquired lease.*"lider/operador-promociones"`
	attempted = `Attempting to acquire leader lease.*"lider/operador-promociones"`
)

// Two replicas with leader election: only the holder of the Lease reconciles,
// and the other takes over when it stops (SIGTERM: it releases the Lease at
// once) or dies (SIGKILL: once the Lease expires).
func TestLeaderElection(t *testing.T) {
	l := newLesson(t)
	l.Namespace("lider")
	const lease = 6 * time.Second
	args := []string{"--leader-elect", "--leader-election-namespace=lider", "--namespace=lider",
		"--leader-elect-lease-duration=" + lease.String(), "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}

	a := l.Start(framework.Launch{Who: "a", Args: args})
	l.WaitForLog(a, "a leads", acquired)
	b := l.Start(framework.Launch{Who: "b", Args: args})
	l.WaitForLog(b, "b waits for the Lease", attempted)

	l.CreatePromociones("lider", 5, 1)
	l.WaitListo("lider", 5)
	// A controller logs "Starting Controller" before its first reconcile: the
	// standby's log would show it had it reconciled any of the five.
	if a.LogHas(`Changed children`) != nil {
		t.Errorf("the leader did not reconcile")
	}
	if b.LogHas(`Starting Controller|Changed children`) == nil {
		t.Errorf("the standby reconciled without the Lease")
	}
	l.Logf("only the leader reconciled")

	sent := time.Now()
	a.Stop(t) // SIGTERM: exits 0, releasing the Lease
	took := l.WaitForLog(b, "b takes over after a's SIGTERM", acquired).Sub(sent)
	l.Logf("FIGURE leader handover after SIGTERM: %s", took.Round(time.Millisecond))
	if took > lease {
		t.Errorf("the handover after SIGTERM took %s, longer than the lease (%s): the Lease was not released", took, lease)
	}
	l.Kubectl("delete", "service", "promo-0", "-n", "lider")
	l.Eventually("b reconciles: the Service is back", func() error { _, err := l.TryKubectl("get", "service", "promo-0", "-n", "lider"); return err })

	c := l.Start(framework.Launch{Who: "c", Args: args})
	l.WaitForLog(c, "c waits for the Lease", attempted)
	sent = time.Now()
	if err := b.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took = l.WaitForLog(c, "c takes over after b's SIGKILL", acquired).Sub(sent)
	l.Logf("FIGURE leader handover after SIGKILL: %s (lease duration %s)", took.Round(time.Millisecond), lease)
	l.Kubectl("delete", "configmap", "promo-1-html", "-n", "lider")
	l.Eventually("c reconciles: the ConfigMap is back", func() error {
		_, err := l.TryKubectl("get", "configmap", "promo-1-html", "-n", "lider")
		return err
	})
	c.Stop(t)
}

// SIGTERM in the middle of a burst: reconciles in flight finish, nothing is
// logged as an error, the process exits 0, and a new process converges the rest.
func TestCleanShutdown(t *testing.T) {
	l := newLesson(t)
	l.Namespace("apagado")
	o := l.Start(framework.Launch{Who: "first", Args: []string{"--namespace=apagado"}})
	l.WaitForLog(o, "the operator is ready", `Starting workers`)
	l.CreatePromociones("apagado", 40, 1)
	l.WaitForLog(o, "it is reconciling", `Changed children`)
	o.Stop(t)
	for _, bad := range []string{`context canceled`, `Reconciler error`, `\tERROR\t`} { // the console format's level
		if o.LogHas(bad) == nil {
			t.Errorf("the log shows %q after SIGTERM", bad)
		}
	}
	l.Logf("SIGTERM mid-burst: exit 0, no error logged")
	second := l.Start(framework.Launch{Who: "second", Args: []string{"--namespace=apagado"}})
	l.WaitListo("apagado", 40)
	second.Stop(t)
}

// The pods the operator makes, and the operator's own Deployment, are admitted
// in a namespace that enforces Pod Security "restricted".
func TestPodSecurityRestricted(t *testing.T) {
	l := newLesson(t)
	const ns = "restringido"
	l.Namespace(ns)
	l.Kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/warn=restricted")
	// The namespace really enforces it: a pod with no security context is refused.
	if out, err := l.TryKubectl("run", "sin-restricciones", "-n", ns, "--image=nginx"); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("an unrestricted pod was not refused: %s %v", out, err)
	}
	o := l.Start(framework.Launch{Who: "admin", Args: []string{"--namespace=" + ns}})
	l.CreatePromociones(ns, 1, 3)
	l.Eventually("3 web pods Running in the restricted namespace", func() error {
		phases := l.Kubectl("get", "pods", "-n", ns, "-l", "tienda.example.com/promocion=promo-0", "-o", "jsonpath={.items[*].status.phase}")
		if phases != "Running Running Running" {
			return fmt.Errorf("pods %q; events: %s", phases, l.Kubectl("get", "events", "-n", ns, "--field-selector=reason=FailedCreate"))
		}
		return nil
	})

	// The operator's ServiceAccount and Deployment, moved to the restricted namespace.
	var manifests []byte
	for _, file := range []string{"sa.yaml", "deploy.yaml"} {
		b, err := os.ReadFile(filepath.Join(l.Root, "manifiestos", file))
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(append(manifests, "\n---\n"...), b...)
	}
	f := filepath.Join(l.Tmp, "deploy.yaml")
	if err := os.WriteFile(f, regexp.MustCompile(`namespace: default`).ReplaceAll(manifests, []byte("namespace: "+ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"--kubeconfig", l.Kubeconfig, "apply", "-f", f}
	out, err := framework.RunCombined(l.KubectlBin, cmd...)
	if err != nil || strings.Contains(out, "violate") {
		t.Errorf("deploy.yaml in a restricted namespace: %v\n%s", err, out)
	}
	l.Eventually("the operator's 2 pods are admitted and Running", func() error {
		phases := l.Kubectl("get", "pods", "-n", ns, "-l", "app=operador-promociones", "-o", "jsonpath={.items[*].status.phase}")
		if phases != "Running Running" {
			return fmt.Errorf("pods %q", phases)
		}
		return nil
	})
	o.Stop(t)
}
