package lesson

import (
	"bytes"
	"fmt"
	"net"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// hack/cluster.sh must fail clearly, naming the component and its log, and leave
// nothing behind: here, once for a port in use and once for a binary that dies,
// with and without the real node.
func TestClusterFailsCleanly(t *testing.T) {
	root := framework.Env.Root
	modes := []string{"none"}
	if framework.Env.RealNode {
		modes = append(modes, "real")
	}
	for _, node := range modes {
		up := func(dir, port string) (string, error) {
			cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), "up")
			cmd.Env = append(os.Environ(), "CLUSTER_DIR="+dir, "CLUSTER_PORT="+port, "CLUSTER_NODE="+node)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		leftovers := func(dir, port string) []string {
			var found []string
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range procs {
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(dir)) {
					found = append(found, strings.ReplaceAll(string(b), "\x00", " "))
				}
			}
			if out, err := exec.Command("ip", "link", "show", "opn"+port).CombinedOutput(); err == nil {
				found = append(found, "the node's link: "+string(out))
			}
			cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/operador-" + port)
			return append(found, cgroups...)
		}

		t.Run("port in use, node "+node, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = ln.Close() }()
			port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
			dir := t.TempDir()
			out, err := up(dir, port)
			if err == nil || !strings.Contains(out, "kube-apiserver cannot start: port "+port+" is already in use") {
				t.Errorf("want a failure naming kube-apiserver and port %s, got %v:\n%s", port, err, out)
			}
			if p := leftovers(dir, port); len(p) > 0 {
				t.Errorf("left behind: %q", p)
			}
		})

		t.Run("a binary that dies, node "+node, func(t *testing.T) {
			dir := t.TempDir()
			// Certificates that kube-apiserver cannot load: etcd starts, kube-apiserver dies.
			pki := filepath.Join(dir, "pki")
			if err := os.MkdirAll(pki, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "admin.key", "sa.key", "sa.pub", "complete"} {
				if err := os.WriteFile(filepath.Join(pki, f), []byte("not a certificate"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out, err := up(dir, "17643")
			log := filepath.Join(dir, "logs", "kube-apiserver.log")
			if err == nil || !strings.Contains(out, "kube-apiserver failed: the process exited") || !strings.Contains(out, log) {
				t.Errorf("want a failure naming kube-apiserver and %s, got %v:\n%s", log, err, out)
			}
			if p := leftovers(dir, "17643"); len(p) > 0 {
				t.Errorf("left behind: %q", p)
			}
		})
	}
}

// Where no real node can run, `make cluster` says why in one line and starts
// the cluster with kwok's nodes alone, never a stack of errors. This machine
// can run them, so its cgroup filesystem is stood in for (CGROUP_FS): first
// node-support's answer for each kind of machine, then a whole cluster up on a
// machine with cgroup v2 only.
func TestClusterFallsBackToKwok(t *testing.T) {
	root := framework.Env.Root
	sh := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), args...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "CLUSTER_NODE=") { // auto, the default
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	fake := func(entries ...string) string {
		dir := t.TempDir()
		for _, e := range entries {
			var err error
			if strings.HasSuffix(e, "/") {
				err = os.MkdirAll(filepath.Join(dir, e), 0o755)
			} else {
				err = os.WriteFile(filepath.Join(dir, e), []byte("cpu memory pids\n"), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	v2 := fake("cgroup.controllers", "cgroup.subtree_control")
	for _, c := range []struct{ machine, fs, want string }{
		{"cgroup v2 only (most current distributions)", v2, "cgroup v2 only"},
		{"no cgroups mounted", fake(), "no cgroup v1 memory and cpu hierarchies"},
		{"cgroup v1 (this project's machines)", fake("memory/", "cpu/", "unified/"), ""},
	} {
		out, err := sh([]string{"CGROUP_FS=" + c.fs, "CLUSTER_DIR=" + t.TempDir()}, "node-support")
		if got := strings.TrimSpace(out); err != nil || (c.want == "" && got != "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: hack/cluster.sh node-support says %q (%v), want %q", c.machine, got, err, c.want)
		}
	}

	dir, port := t.TempDir(), "17943"
	env := []string{"CGROUP_FS=" + v2, "CLUSTER_DIR=" + dir, "CLUSTER_PORT=" + port}
	t.Cleanup(func() { _, _ = sh(env, "down") })
	out, err := sh(env, "up")
	if err != nil {
		t.Fatalf("hack/cluster.sh up on a cgroup v2 machine: %v\n%s", err, out)
	}
	said := regexp.MustCompile(`(?m)^cluster: no real node can run here \(cgroup v2 only.*\): kwok's nodes only, and the operator runs on this machine`).FindAllString(out, -1)
	if len(said) != 1 || strings.Contains(out, "failed") || strings.Contains(out, "starting node-") {
		t.Errorf("want one line saying why there is no real node, and no node started; got:\n%s", out)
	}
	nodes, err := exec.Command(framework.Env.KubectlBin, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "get", "nodes", "-o", "name").Output()
	if got := strings.Fields(string(nodes)); err != nil || !slices.Equal(got, []string{"node/kwok-01", "node/kwok-02"}) {
		t.Errorf("the cluster's nodes: %v (%v), want kwok's two alone", got, err)
	}
	if _, err := sh(env, "real-nodes"); err == nil {
		t.Errorf("hack/cluster.sh real-nodes says the cluster has real nodes")
	}
	t.Logf("%s", said[0])
	if out, err := sh(env, "down"); err != nil {
		t.Errorf("hack/cluster.sh down: %v\n%s", err, out)
	}
}
