package framework

// A Harness is a test's view of its suite's cluster (kubectl, a client, a
// folder for logs); it starts operator processes, waits for things to become
// true, and reads what the operator and the API server recorded (metrics,
// logs, the audit log).

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The lesson's Promocion; the operator's namespace in a team's install
// (manifiestos/sistema/namespace.yaml); the operator's ServiceAccount as the
// API server names it, in the lesson's layout (default) and in a team's; and
// how long a test waits for a thing to become true.
const (
	LessonName       = "rebajas-verano"
	LessonBanner     = "https://tienda.example.com"
	SystemNamespace  = "operador-promociones-system"
	OperatorUser     = "system:serviceaccount:default:operador-promociones"
	TeamOperatorUser = "system:serviceaccount:" + SystemNamespace + ":operador-promociones"
	WaitTimeout      = 90 * time.Second
)

// Harness is one test's view of its suite's cluster.
type Harness struct {
	*Suite
	T         testing.TB
	Tmp       string
	logs      []string         // every operator log file, dumped if the test fails
	operators []*Operator      // every operator started, for DumpRunning
	C         client.WithWatch // the admin's client
}

// NewHarness gives a test its suite's cluster, a folder for its logs, and a
// dump of the operator's logs and the cluster's state if it fails.
func NewHarness(t testing.TB, s *Suite) *Harness {
	h := &Harness{Suite: s, T: t, Tmp: t.TempDir()}
	t.Cleanup(h.dumpOnFailure)
	h.C = h.ClientFor(h.Kubeconfig)
	return h
}

func (h *Harness) Step(n, title string) {
	h.T.Helper()
	h.T.Logf("===== Step %s: %s", n, title)
}

func (h *Harness) Logf(format string, args ...any) {
	h.T.Helper()
	h.T.Logf("    "+format, args...)
}

func (h *Harness) dumpOnFailure() {
	if !h.T.Failed() {
		return
	}
	for _, f := range h.logs {
		b, _ := os.ReadFile(f)
		h.T.Logf("----- operator log %s -----\n%s", filepath.Base(f), b)
	}
	// With the API server gone, kubectl has nothing to say, and what CI
	// shows of a failure is its end: say so once, and end with the control
	// plane's own last words instead.
	if _, err := h.TryKubectl("get", "--raw", "/readyz"); err != nil {
		h.T.Logf("----- the API server does not answer (%v); the control plane's logs end with -----", err)
		h.LogControlPlane(15)
		return
	}
	h.LogKubectl(
		[]string{"get", "all,cm,promociones", "-o", "wide"},
		[]string{"get", "events", "--sort-by=.lastTimestamp"},
		[]string{"logs", "-l", "app=operador-promociones", "--tail=100", "--prefix"}, // the operator's Pods, if it ran in the cluster
	)
}
