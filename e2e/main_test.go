// Package e2e walks through the lesson, Steps 1 to 9, on a real cluster
// (hack/cluster.sh: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, a real node running containerd and the kubelet, and kwok's
// fake nodes), with the real operator binary, its image, and kubectl, and
// checks what the lesson tells the learner to look at. Run it with `make e2e`;
// -v shows each step as it happens.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
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
	logs       []string         // every operator log file, dumped if the test fails
	c          client.WithWatch // the admin's client
}

// env is the cluster and binaries every test shares. TestMain builds the
// operator once and starts one cluster, beside any `make cluster` a developer runs.
var env struct {
	root, kubectlBin, kubeconfig, operator string
	clusterDir                             string // hack/cluster.sh's CLUSTER_DIR: logs/, pids/
	// realNode: the cluster has node-real, where the Pods of namespaces not
	// marked for kwok run for real (CLUSTER_NODE=none leaves it out).
	realNode bool
}

// clusterSh runs hack/cluster.sh on the tests' cluster.
func clusterSh(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(env.root, "hack", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+env.clusterDir, "CLUSTER_PORT=17443")
	return cmd
}

// webImage is the local stand-in for the default web image, on node-real.
const webImage = "localhost/nginx-unprivileged:debian"

func TestMain(m *testing.M) {
	code, err := runE2E(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func runE2E(m *testing.M) (int, error) {
	log.SetLogger(logr.Discard()) // the tests' clients have nothing to log
	root, err := filepath.Abs("..")
	if err != nil {
		return 1, err
	}
	env.root = root
	tmp, err := os.MkdirTemp("", "operador-e2e-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(tmp)
	run := func(cmd *exec.Cmd) (string, error) {
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s: %w\n%s%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String(), nil
	}
	bins, err := run(exec.Command(filepath.Join(root, "hack", "k8s-binaries.sh")))
	if err != nil {
		return 1, err
	}
	env.kubectlBin = filepath.Join(strings.TrimSpace(bins), "kubectl")
	env.operator = filepath.Join(tmp, "operador-promociones")
	build := exec.Command("go", "build", "-o", env.operator, ".")
	build.Dir = root
	if _, err := run(build); err != nil {
		return 1, err
	}

	// One folder and one port for every run: a run killed before its cleanup
	// (kill -9, a timeout's panic) is taken down here, not left to break this one.
	env.clusterDir = filepath.Join(os.TempDir(), "operador-e2e-cluster")
	env.realNode = os.Getenv("CLUSTER_NODE") != "none"
	if _, err := run(clusterSh("down")); err != nil {
		return 1, err
	}
	before := machineState()
	// Once, whether the tests end or the run is interrupted, and the other waits.
	var once sync.Once
	var downErr error
	down := func() error {
		once.Do(func() {
			if _, downErr = run(clusterSh("down")); downErr != nil {
				return
			}
			if diff := before.diff(machineState()); diff != "" {
				downErr = fmt.Errorf("hack/cluster.sh down left the machine changed:\n%s", diff)
			}
		})
		return downErr
	}
	stopWatching := cleanUpWhenInterrupted(down)
	defer stopWatching()
	start := time.Now()
	if _, err := run(clusterSh("up")); err != nil {
		return 1, errors.Join(err, down())
	}
	env.kubeconfig = filepath.Join(env.clusterDir, "kubeconfig")
	fmt.Printf("cluster up in %s\n", time.Since(start).Round(time.Millisecond))

	// The previous lesson taught the cluster the noun.
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join(root, "manifiestos", "crd.yaml")},
		{"wait", "--for=condition=Established", "--timeout=60s", "crd/promociones.tienda.example.com"},
	} {
		if _, err := run(exec.Command(env.kubectlBin, append([]string{"--kubeconfig", env.kubeconfig}, args...)...)); err != nil {
			return 1, err
		}
	}
	code := m.Run()
	return code, down()
}

// newLesson gives a test the shared cluster, a folder for its logs, and a dump
// of the operator's logs and the cluster's state if it fails.
func newLesson(t *testing.T) *lesson {
	l := &lesson{t: t, root: env.root, tmp: t.TempDir(), kubectlBin: env.kubectlBin,
		kubeconfig: env.kubeconfig, operator: env.operator}
	t.Cleanup(l.dumpOnFailure)
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling, as the operator
	if l.c, err = client.NewWithWatch(cfg, client.Options{}); err != nil {
		t.Fatal(err)
	}
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
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		l.t.Fatal(err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	took := recreationTime(l.t, c, &appsv1.DeploymentList{}, dep, nil)
	l.logf("deployment.apps/%s deleted and back", name)
	return took
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
// ServiceAccount sa of default, as a Pod running as sa would have.
func (l *lesson) serviceAccountKubeconfig(sa string) string {
	l.t.Helper()
	token := l.kubectl("create", "token", sa, "-n", "default", "--duration=1h")
	server := l.kubectl("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.server}")
	ca := l.kubectl("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	path := filepath.Join(l.tmp, sa+".kubeconfig")
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
	// fence.go's client forwards every kind of write, Delete included, only to
	// guard it; what counts is that nothing calls it, and that the API server's
	// audit log shows no delete from the operator.
	forward := regexp.MustCompile(`\bc\.Client\.Delete(AllOf)?\(`)
	deleteCall := regexp.MustCompile(`\.Delete(AllOf)?\(`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			l.t.Fatal(err)
		}
		if deleteCall.Match(forward.ReplaceAll(src, nil)) {
			l.t.Errorf("%s calls Delete: the cleanup should be the garbage collector's", filepath.Base(f))
		}
	}
	for _, w := range operatorWrites(l, time.Time{}) {
		if w.verb == "delete" || w.verb == "deletecollection" {
			l.t.Errorf("the operator sent %s %s", w.verb, w.uri)
		}
	}
	l.logf("no Delete in the operator's code, and none in the audit log: the garbage collector did it")
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
		{"logs", "-l", "app=operador-promociones", "--tail=100", "--prefix"}, // the operator's Pods, if it ran in the cluster
	} {
		out, err := l.tryKubectl(args...)
		l.t.Logf("----- kubectl %s -----\n%s %v", strings.Join(args, " "), out, err)
	}
}

// waitForLog waits until the operator's log matches pattern and returns when
// it first saw it.
func (l *lesson) waitForLog(o *operator, what, pattern string) time.Time {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if o.logHas(pattern) == nil {
			l.logf("ok: %s", what)
			return time.Now()
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("%s: no %q in %s after %s", what, pattern, o.log, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// applyPromociones creates n Promociones in ns with one kubectl apply.
func (l *lesson) applyPromociones(ns string, n int, replicas int) {
	l.t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: tienda.example.com/v1\nkind: Promocion\nmetadata: {name: promo-%d, namespace: %s}\nspec: {banner: oferta %d, replicas: %d}\n", i, ns, i, replicas)
	}
	f := filepath.Join(l.tmp, ns+"-promociones.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		l.t.Fatal(err)
	}
	l.kubectl("apply", "-f", f)
}

const (
	acquired  = `Successfully acquired lease.*"lider/operador-promociones"`
	attempted = `Attempting to acquire leader lease.*"lider/operador-promociones"`
)

// allListo checks that n Promociones in ns are Listo.
func (l *lesson) allListo(ns string, n int) error {
	out := l.kubectl("get", "promociones", "-n", ns, "-o", "jsonpath={range .items[*]}{.status.fase}{\"\\n\"}{end}")
	if got := strings.Count(out, "Listo"); got != n {
		return fmt.Errorf("%d of %d Listo", got, n)
	}
	return nil
}

// operator is a running operator process.
type operator struct {
	cmd        *exec.Cmd
	log        string
	startedAt  time.Time
	metricsURL string
	done       chan struct{}
	err        error
}

// startOperator runs the operator binary with kubeconfig and args; its ports
// are random unless args set them.
func (l *lesson) startOperator(who, kubeconfig string, args ...string) *operator {
	l.t.Helper()
	return l.startOperatorEnv(who, kubeconfig, nil, args...)
}

// startOperatorEnv is startOperator with more environment variables.
func (l *lesson) startOperatorEnv(who, kubeconfig string, env []string, args ...string) *operator {
	l.t.Helper()
	o := &operator{log: filepath.Join(l.tmp, fmt.Sprintf("operator-%d-%s.log", len(l.logs)+1, who)), done: make(chan struct{})}
	f, err := os.Create(o.log)
	if err != nil {
		l.t.Fatal(err)
	}
	l.logs = append(l.logs, o.log)
	args = append([]string{"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"}, args...)
	o.cmd = exec.Command(l.operator, args...)
	o.cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), env...)
	o.cmd.Stdout, o.cmd.Stderr = f, f
	o.startedAt = time.Now()
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

// firstLine is the first line of the log matching pattern ("" for the first line).
func (o *operator) firstLine(pattern string) string {
	b, _ := os.ReadFile(o.log)
	re := regexp.MustCompile(pattern)
	for line := range strings.SplitSeq(string(b), "\n") {
		if re.MatchString(line) {
			return line
		}
	}
	return ""
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

// runCombined runs a command and returns its stdout and stderr together:
// kubectl prints admission warnings on stderr.
func runCombined(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// namespace creates a namespace whose Pods go to kwok's nodes: the tests that
// make hundreds of them, or that need no process behind them, use it.
func (l *lesson) namespace(name string) string {
	l.kubectl("create", "namespace", name)
	l.kubectl("annotate", "namespace", name, "scheduler.alpha.kubernetes.io/node-selector=type=kwok")
	return name
}

// deleteNamespace deletes ns and waits until it is gone, so that its garbage
// collection does not weigh on the next measurement.
func (l *lesson) deleteNamespace(ns string) {
	l.kubectl("delete", "namespace", ns, "--timeout=10m")
}

// parallel runs f(0..n-1) on workers goroutines, failing the test on an error.
// An object that already exists is not one.
func (l *lesson) parallel(n, workers int, f func(i int) error) {
	l.t.Helper()
	next := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		l.t.Fatal(err)
	}
}

// createPromociones creates promo-0 to promo-<n-1> in ns, 32 at a time.
func (l *lesson) createPromociones(ns string, n, replicas int) {
	l.parallel(n, 32, func(i int) error {
		return l.c.Create(context.Background(), promocion(ns, i, replicas))
	})
}

func promocion(ns string, i, replicas int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tienda.example.com/v1", "kind": "Promocion",
		"metadata": map[string]any{"name": fmt.Sprintf("promo-%d", i), "namespace": ns},
		"spec":     map[string]any{"banner": fmt.Sprintf("Oferta número %d", i), "replicas": int64(replicas)},
	}}
}
