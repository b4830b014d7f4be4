package framework

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// A suite's check of the machine takes as its own cluster's only the
// processes that name its folder, not a second cluster's beside it.
func TestInDir(t *testing.T) {
	cmdline := func(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }
	for _, tc := range []struct {
		cmdline []byte
		want    bool
	}{
		{cmdline("etcd", "--data-dir", "/tmp/operador-e2e-chaos/etcd"), true},
		{cmdline("kwok", "--kubeconfig=/tmp/operador-e2e-chaos/kubeconfig"), true},
		{cmdline("kube-apiserver", "--cert-dir", "/tmp/operador-e2e-chaos"), true},
		{[]byte("sh -c cd /tmp/operador-e2e-chaos"), true},
		{cmdline("etcd", "--data-dir", "/tmp/operador-e2e-chaos-17943/etcd"), false},
		{cmdline("kwok", "--kubeconfig=/tmp/operador-e2e-chaos-17943/kubeconfig", "--x=/tmp/operador-e2e-chaosy"), false},
		{cmdline("kwok", "--kubeconfig=/tmp/operador-e2e-chaos-17943/kubeconfig", "--log=/tmp/operador-e2e-chaos/kwok.log"), true},
	} {
		if got := inDir(tc.cmdline, "/tmp/operador-e2e-chaos"); got != tc.want {
			t.Errorf("inDir(%q) = %v, want %v", tc.cmdline, got, tc.want)
		}
	}
}

// A second run of a suite stops before it touches the first's cluster.
func TestClaimClusterDir(t *testing.T) {
	dir := t.TempDir() + "/operador-e2e-chaos"
	if err := claimClusterDir(dir); err != nil {
		t.Fatal(err)
	}
	first := claimed
	t.Cleanup(func() { _ = first.Close() })
	err := claimClusterDir(dir)
	if err == nil || !strings.Contains(err.Error(), "E2E_PORT") || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second claim of %s: %v, want a refusal naming the holder and E2E_PORT", dir, err)
	}
	if err := claimClusterDir(dir + "-17943"); err != nil {
		t.Fatalf("a second cluster's folder: %v", err)
	}
	_ = claimed.Close()
}
