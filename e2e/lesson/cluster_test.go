package lesson

import (
	"bytes"
	"fmt"
	"net"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
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
