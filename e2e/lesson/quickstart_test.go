package lesson

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"operador-promociones/e2e/framework"
)

// The README's quick start, command by command, on a cluster of its own
// (its own folder and port, beside the tests' cluster): make dev, then what
// the README tells a reader to run, then make cluster-down.
func TestQuickStart(t *testing.T) {
	l := newLessonOnRealNodes(t)
	dir := filepath.Join(t.TempDir(), "cluster")
	runMake := func(target string) {
		t.Helper()
		cmd := exec.Command("make", target)
		cmd.Dir = l.Root
		cmd.Env = append(os.Environ(), "CLUSTER_DIR="+dir, "CLUSTER_PORT=17543")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
		l.Logf("make %s:\n%s", target, framework.LastLines(string(out), 12))
	}
	t.Cleanup(func() { runMake("cluster-down") })
	runMake("dev")

	kubectl := func(args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(l.Root, "bin", "kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"))
		return cmd
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := kubectl(args...).Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	if row := run("get", "promociones"); !strings.Contains(strings.Join(strings.Fields(row), " "), "rebajas-verano https://tienda.example.com 3 3 Listo") {
		t.Errorf("bin/kubectl get promociones:\n%s", row)
	}
	if logs := run("logs", "-l", "app=operador-promociones"); !strings.Contains(logs, "leader") {
		t.Errorf("bin/kubectl logs -l app=operador-promociones shows no leader election:\n%s", logs)
	}
	pf := kubectl("port-forward", "svc/rebajas-verano", "8080:80")
	out, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.Contains(line, "8080") {
		t.Fatalf("bin/kubectl port-forward svc/rebajas-verano 8080:80: %q %v", line, err)
	}
	page := framework.HTTPGet(t, "http://localhost:8080")
	if !strings.Contains(page, "<h1>https://tienda.example.com</h1>") {
		t.Errorf("http://localhost:8080 serves:\n%s", page)
	}
	l.Logf("the README's commands ran as it says: get promociones, logs, port-forward and the page")
	runMake("cluster-down")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("make cluster-down left %s", dir)
	}
}
