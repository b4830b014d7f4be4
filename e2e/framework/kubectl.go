package framework

// kubectl and waits: running kubectl as the admin, asking what a user may
// do, waiting for a thing to become true, and what a failed test dumps.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RestConfig is kubeconfig's connection and identity.
func (h *Harness) RestConfig(kubeconfig string) *rest.Config {
	h.T.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		h.T.Fatal(err)
	}
	return cfg
}

// ClientFor is a client with kubeconfig's identity and, like the operator, no
// client-side rate limit. Every client of the tests is made here.
func (h *Harness) ClientFor(kubeconfig string) client.WithWatch {
	h.T.Helper()
	cfg := h.RestConfig(kubeconfig)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		h.T.Fatal(err)
	}
	return c
}

func (h *Harness) TryKubectl(args ...string) (string, error) {
	cmd := exec.Command(h.KubectlBin, append([]string{"--kubeconfig", h.Kubeconfig}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), err
}

// CanI is kubectl auth can-i as user: "yes" or "no".
func (h *Harness) CanI(user string, args ...string) string {
	out, _ := h.TryKubectl(append(append([]string{"auth", "can-i"}, args...), "--as="+user)...) // exit 1 for "no"
	return out
}

func (h *Harness) ExpectCanI(user, want string, args ...string) {
	h.T.Helper()
	if got := h.CanI(user, args...); got != want {
		h.T.Errorf("kubectl auth can-i %s --as=%s: %q, want %q", strings.Join(args, " "), user, got, want)
	}
}

// RunCombined runs a command and returns its stdout and stderr together:
// kubectl prints admission warnings on stderr.
func RunCombined(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// Kubectl runs Kubectl as the admin, failing the test if it fails.
func (h *Harness) Kubectl(args ...string) string {
	h.T.Helper()
	out, err := h.TryKubectl(args...)
	if err != nil {
		h.T.Fatal(err)
	}
	return out
}

// Poll calls check every interval until it returns nil, and gives up after
// within with check's last error. Every wait of these tests is this loop.
func Poll(within, every time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(every)
	}
}

// WaitFor polls check until it holds, and returns when it did; after within,
// it fails the test.
func (h *Harness) WaitFor(what string, within, every time.Duration, check func() error) time.Time {
	h.T.Helper()
	if err := Poll(within, every, check); err != nil {
		h.T.Fatalf("%s: not true after %s: %v", what, within, err)
	}
	h.Logf("ok: %s", what)
	return time.Now()
}

func (h *Harness) Eventually(what string, check func() error) {
	h.T.Helper()
	h.WaitFor(what, WaitTimeout, 100*time.Millisecond, check)
}

// LogKubectl logs what each kubectl command prints, under its command line,
// failed or not: a dump on failure.
func (h *Harness) LogKubectl(commands ...[]string) {
	for _, args := range commands {
		out, err := h.TryKubectl(args...)
		h.T.Logf("----- kubectl %s -----\n%s %v", strings.Join(args, " "), out, err)
	}
}

// LogControlPlane logs the last n lines of each of the cluster's logs but
// the audit log (the requests, not what went wrong).
func (h *Harness) LogControlPlane(n int) {
	logs, _ := filepath.Glob(filepath.Join(h.ClusterDir, "logs", "*.log"))
	for _, f := range logs {
		if filepath.Base(f) == "audit.log" {
			continue
		}
		b, _ := os.ReadFile(f)
		h.T.Logf("----- %s -----\n%s", filepath.Base(f), LastLines(string(b), n))
	}
}

// ReadFile is the file's content; the test fails if it cannot be read.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// LastLines is the end of s, n lines of it.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func HTTPGet(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
