// Package e2e walks through the lesson, Steps 1 to 9, on a real control plane
// (hack/cluster.sh: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok), with the real operator binary and kubectl, and checks
// what the lesson tells the learner to look at. Run it with `make e2e`; -v
// shows each step as it happens.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	name    = "rebajas-verano"
	banner  = "https://tienda.example.com"
	sa      = "system:serviceaccount:default:operador-promociones"
	timeout = 90 * time.Second
)

// lesson holds what the walk-through uses: a cluster of its own, kubectl, and
// the operator binary.
type lesson struct {
	t          *testing.T
	root, tmp  string
	kubectlBin string
	kubeconfig string
	operator   string
	running    *operator
	logs       []string // every operator log file, dumped if the test fails
}

func TestLesson(t *testing.T) {
	l := setUp(t)

	l.step("1", "go run . (the operator, built with go build, against the admin kubeconfig)")
	l.running = l.startOperator("admin", l.kubeconfig)
	l.eventually("the operator starts its watches", func() error {
		return l.running.logHas(
			`kind source: \*main.Promocion`, `kind source: \*v1.Deployment`,
			`kind source: \*v1.Service`, `kind source: \*v1.ConfigMap`, `Starting workers`)
	})
	if first := l.running.firstLine(); !strings.Contains(first, "operador-promociones arrancando") {
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

	l.step("4", "the image: no Docker engine here; dockerfile_test.go builds the Dockerfile's binary and checks it is static")
	l.running.stop(t)

	l.step("5", "the operator as its ServiceAccount, without RBAC")
	l.kubectl("apply", "-f", filepath.Join(l.root, "manifiestos", "sa.yaml"))
	saConfig := l.serviceAccountKubeconfig()
	l.kubectl("delete", "service", name) // work for it to do, once it may
	l.running = l.startOperator("serviceaccount", saConfig)
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
	l.kubectl("apply", "-f", filepath.Join(l.root, "manifiestos", "deploy.yaml"))
	l.kubectl("delete", "-f", filepath.Join(l.root, "manifiestos", "deploy.yaml")) // the binary plays it here: kwok runs no container

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

func setUp(t *testing.T) *lesson {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	l := &lesson{t: t, root: root, tmp: t.TempDir()}
	bins := strings.TrimSpace(l.run(exec.Command(filepath.Join(root, "hack", "k8s-binaries.sh"))))
	l.kubectlBin = filepath.Join(bins, "kubectl")

	l.operator = filepath.Join(l.tmp, "operador-promociones")
	build := exec.Command("go", "build", "-o", l.operator, ".")
	build.Dir = root
	l.run(build)

	// A cluster of its own, beside any `make cluster` a developer runs.
	clusterDir, err := os.MkdirTemp("", "operador-e2e-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	cluster := func(verb string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), verb)
		cmd.Env = append(os.Environ(), "CLUSTER_DIR="+clusterDir, "CLUSTER_PORT=17443")
		return cmd
	}
	start := time.Now()
	t.Cleanup(func() { l.run(cluster("down")) })
	l.run(cluster("up"))
	l.kubeconfig = filepath.Join(clusterDir, "kubeconfig")
	t.Logf("cluster up in %s (logs in %s/logs)", time.Since(start).Round(time.Millisecond), clusterDir)
	t.Cleanup(l.dumpOnFailure)

	// The previous lesson: the CRD and the Promocion.
	l.kubectl("apply", "-f", filepath.Join(root, "manifiestos", "crd.yaml"))
	l.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/promociones.tienda.example.com")
	l.kubectl("apply", "-f", filepath.Join(root, "manifiestos", "ejemplos", "rebajas-verano.yaml"))
	return l
}

func (l *lesson) step(n, title string) {
	l.t.Helper()
	l.t.Logf("===== Step %s: %s", n, title)
}

func (l *lesson) logf(format string, args ...any) {
	l.t.Helper()
	l.t.Logf("    "+format, args...)
}

// run runs a command to completion, failing the test if it fails.
func (l *lesson) run(cmd *exec.Cmd) string {
	l.t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		l.t.Fatalf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func (l *lesson) tryKubectl(args ...string) (string, error) {
	cmd := exec.Command(l.kubectlBin, append([]string{"--kubeconfig", l.kubeconfig}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), err
}

// kubectl runs kubectl as the admin, failing the test if it fails.
func (l *lesson) kubectl(args ...string) string {
	l.t.Helper()
	out, err := l.tryKubectl(args...)
	if err != nil {
		l.t.Fatal(err)
	}
	return out
}

func (l *lesson) eventually(what string, check func() error) {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			l.logf("ok: %s", what)
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// row is rebajas-verano's row of `kubectl get promociones`, after checking the
// lesson's columns.
func (l *lesson) row() []string {
	l.t.Helper()
	lines := strings.Split(l.kubectl("get", "promociones"), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "NAME BANNER DESEADAS LISTAS FASE EDAD" {
		l.t.Fatalf("kubectl get promociones has the columns %q", got)
	}
	for _, line := range lines[1:] {
		if f := strings.Fields(line); len(f) == 6 && f[0] == name {
			return f
		}
	}
	l.t.Fatalf("no complete row for %s in:\n%s", name, strings.Join(lines, "\n"))
	return nil
}

func (l *lesson) waitForRow(deseadas, listas, fase string) {
	l.t.Helper()
	l.eventually(fmt.Sprintf("kubectl get promociones shows %s %s %s", deseadas, listas, fase), func() error {
		lines := strings.Split(l.kubectl("get", "promociones"), "\n")
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			if len(f) == 6 && f[0] == name && f[1] == banner && f[2] == deseadas && f[3] == listas && f[4] == fase {
				l.logf("%s\n    %s", lines[0], line)
				return nil
			}
		}
		return fmt.Errorf("%s", strings.Join(lines, "\n"))
	})
}

// watchPromociones runs `kubectl get promociones -w` until the returned
// function is called, which returns what it printed.
func (l *lesson) watchPromociones() func() string {
	l.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, l.kubectlBin, "--kubeconfig", l.kubeconfig, "get", "promociones", "-w")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.eventually("kubectl get promociones -w prints the current row", func() error {
		if !strings.Contains(out.String(), name) {
			return errors.New("nothing yet")
		}
		return nil
	})
	return func() string {
		cancel()
		_ = cmd.Wait()
		return out.String()
	}
}

// timeRecreation does what `kubectl delete deployment rebajas-verano` does, and
// returns the time from the delete request to the watch event of the
// operator's new Deployment. kubectl's own start-up would swamp the figure, so
// the request is made here.
func (l *lesson) timeRecreation() time.Duration {
	l.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig)
	if err != nil {
		l.t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w, err := cs.AppsV1().Deployments("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		l.t.Fatal(err)
	}
	defer w.Stop()
	var old *appsv1.Deployment
	for ev := range w.ResultChan() { // the current Deployment comes first, as ADDED
		old = ev.Object.(*appsv1.Deployment)
		break
	}
	start := time.Now()
	if err := cs.AppsV1().Deployments("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		l.t.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type == watch.Added && d.UID != old.UID {
			l.logf("deployment.apps/%s deleted; back as uid %s", name, d.UID)
			return time.Since(start)
		}
	}
	l.t.Fatalf("the Deployment did not come back within %s", timeout)
	return 0
}

func (l *lesson) uids() map[string]string {
	l.t.Helper()
	uids := map[string]string{}
	for _, obj := range []string{"deployment/" + name, "service/" + name, "configmap/" + name + "-html"} {
		uids[obj], _ = l.tryKubectl("get", obj, "-o", "jsonpath={.metadata.uid}")
	}
	return uids
}

// serviceAccountKubeconfig writes a kubeconfig holding a token for the
// operator's ServiceAccount, as the Pod in the cluster would have.
func (l *lesson) serviceAccountKubeconfig() string {
	l.t.Helper()
	token := l.kubectl("create", "token", "operador-promociones", "-n", "default", "--duration=1h")
	server := l.kubectl("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.server}")
	ca := l.kubectl("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	path := filepath.Join(l.tmp, "serviceaccount.kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: operador-promociones, user: {token: %q}}]
contexts: [{name: local, context: {cluster: local, user: operador-promociones, namespace: default}}]
current-context: local
`, server, ca, token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		l.t.Fatal(err)
	}
	return path
}

// assertNoDeleteInOperator checks the claim of Step 9: the cleanup is the
// garbage collector's, the operator's code has no Delete call.
func (l *lesson) assertNoDeleteInOperator() {
	l.t.Helper()
	files, _ := filepath.Glob(filepath.Join(l.root, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			l.t.Fatal(err)
		}
		if regexp.MustCompile(`\.Delete(AllOf)?\(`).Match(src) {
			l.t.Errorf("%s calls Delete: the cleanup should be the garbage collector's", filepath.Base(f))
		}
	}
	l.logf("no Delete in the operator's code: the garbage collector did it")
}

func (l *lesson) dumpOnFailure() {
	if !l.t.Failed() {
		return
	}
	for _, f := range l.logs {
		b, _ := os.ReadFile(f)
		l.t.Logf("----- operator log %s -----\n%s", filepath.Base(f), b)
	}
	for _, args := range [][]string{
		{"get", "all,cm,promociones", "-o", "wide"},
		{"get", "events", "--sort-by=.lastTimestamp"},
	} {
		out, err := l.tryKubectl(args...)
		l.t.Logf("----- kubectl %s -----\n%s %v", strings.Join(args, " "), out, err)
	}
}

// operator is a running operator process.
type operator struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func (l *lesson) startOperator(who, kubeconfig string) *operator {
	l.t.Helper()
	o := &operator{log: filepath.Join(l.tmp, fmt.Sprintf("operator-%d-%s.log", len(l.logs)+1, who)), done: make(chan struct{})}
	f, err := os.Create(o.log)
	if err != nil {
		l.t.Fatal(err)
	}
	l.logs = append(l.logs, o.log)
	o.cmd = exec.Command(l.operator, "--metrics-bind-address=127.0.0.1:0")
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	o.cmd.Stdout, o.cmd.Stderr = f, f
	if err := o.cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	go func() { o.err = o.cmd.Wait(); f.Close(); close(o.done) }()
	l.t.Cleanup(func() { _ = o.cmd.Process.Kill(); <-o.done })
	l.logf("operator started as %s (pid %d, log %s)", who, o.cmd.Process.Pid, o.log)
	return o
}

func (o *operator) exited() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, as the kubelet would, and expects a clean exit.
func (o *operator) stop(t *testing.T) {
	t.Helper()
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
		if o.err != nil {
			t.Errorf("the operator exited with %v after SIGTERM, want 0", o.err)
		}
	case <-time.After(time.Minute):
		t.Errorf("the operator did not exit within a minute of SIGTERM")
	}
}

func (o *operator) firstLine() string {
	b, _ := os.ReadFile(o.log)
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

// logHas reports an error unless the log matches every pattern.
func (o *operator) logHas(patterns ...string) error {
	b, _ := os.ReadFile(o.log)
	for _, p := range patterns {
		if !regexp.MustCompile(p).Match(b) {
			return fmt.Errorf("the log has no line matching %q", p)
		}
	}
	return nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// hack/cluster.sh must fail clearly, naming the component and its log, and leave
// no process behind: here, once for a port in use and once for a binary that dies.
func TestClusterFailsCleanly(t *testing.T) {
	root, _ := filepath.Abs("..")
	up := func(dir, port string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), "up")
		cmd.Env = append(os.Environ(), "CLUSTER_DIR="+dir, "CLUSTER_PORT="+port)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	leftovers := func(dir string) []string {
		var found []string
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(dir)) {
				found = append(found, strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
		return found
	}

	t.Run("port in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		dir := t.TempDir()
		out, err := up(dir, port)
		if err == nil || !strings.Contains(out, "kube-apiserver cannot start: port "+port+" is already in use") {
			t.Errorf("want a failure naming kube-apiserver and port %s, got %v:\n%s", port, err, out)
		}
		if p := leftovers(dir); len(p) > 0 {
			t.Errorf("processes left behind: %q", p)
		}
	})

	t.Run("a binary that dies", func(t *testing.T) {
		dir := t.TempDir()
		// Certificates that kube-apiserver cannot load: etcd starts, kube-apiserver dies.
		pki := filepath.Join(dir, "pki")
		if err := os.MkdirAll(pki, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "admin.key", "sa.key", "sa.pub"} {
			if err := os.WriteFile(filepath.Join(pki, f), []byte("not a certificate"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, err := up(dir, "17643")
		log := filepath.Join(dir, "logs", "kube-apiserver.log")
		if err == nil || !strings.Contains(out, "kube-apiserver failed: the process exited") || !strings.Contains(out, log) {
			t.Errorf("want a failure naming kube-apiserver and %s, got %v:\n%s", log, err, out)
		}
		if p := leftovers(dir); len(p) > 0 {
			t.Errorf("processes left behind: %q", p)
		}
	})
}
