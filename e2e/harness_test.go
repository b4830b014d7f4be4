package e2e

// The one harness of every e2e test: a lesson is a test's view of the shared
// cluster (kubectl, a client, a folder for logs); it starts operator
// processes, waits for things to become true, and reads what the operator and
// the API server recorded (metrics, logs, the audit log).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	name    = "rebajas-verano"
	banner  = "https://tienda.example.com"
	sa      = "system:serviceaccount:default:operador-promociones"
	timeout = 90 * time.Second
)

// lesson is one test's view of the shared cluster.
type lesson struct {
	t          *testing.T
	root, tmp  string
	kubectlBin string
	kubeconfig string
	logs       []string         // every operator log file, dumped if the test fails
	c          client.WithWatch // the admin's client
}

// newLesson gives a test the shared cluster, a folder for its logs, and a dump
// of the operator's logs and the cluster's state if it fails.
func newLesson(t *testing.T) *lesson {
	l := &lesson{t: t, root: env.root, tmp: t.TempDir(), kubectlBin: env.kubectlBin, kubeconfig: env.kubeconfig}
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

// canI is kubectl auth can-i as user: "yes" or "no".
func (l *lesson) canI(user string, args ...string) string {
	out, _ := l.tryKubectl(append(append([]string{"auth", "can-i"}, args...), "--as="+user)...) // exit 1 for "no"
	return out
}

func (l *lesson) expectCanI(user, want string, args ...string) {
	l.t.Helper()
	if got := l.canI(user, args...); got != want {
		l.t.Errorf("kubectl auth can-i %s --as=%s: %q, want %q", strings.Join(args, " "), user, got, want)
	}
}

// runCombined runs a command and returns its stdout and stderr together:
// kubectl prints admission warnings on stderr.
func runCombined(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
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

// ----- waiting -----

// poll calls check every interval until it returns nil, and gives up after
// within with check's last error. Every wait of these tests is this loop.
func poll(within, every time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(every)
	}
}

// waitFor polls check until it holds, and returns when it did; after within,
// it fails the test.
func (l *lesson) waitFor(what string, within, every time.Duration, check func() error) time.Time {
	l.t.Helper()
	if err := poll(within, every, check); err != nil {
		l.t.Fatalf("%s: not true after %s: %v", what, within, err)
	}
	l.logf("ok: %s", what)
	return time.Now()
}

func (l *lesson) eventually(what string, check func() error) {
	l.t.Helper()
	l.waitFor(what, timeout, 100*time.Millisecond, check)
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

// ----- operator processes -----

// operator is a running operator process.
type operator struct {
	cmd                   *exec.Cmd
	log                   string
	startedAt             time.Time
	metricsURL, probesURL string // http://127.0.0.1:port
	done                  chan struct{}
	err                   error
}

// launch is an operator process to start.
type launch struct {
	who        string // names its log
	kubeconfig string // default: the admin's
	binary     string // default: the operator built for the tests
	args       []string
	// secureMetrics serves /metrics as in production, over HTTPS to
	// authorized tokens; by default the tests read it in plain HTTP.
	secureMetrics bool
	// plainMetricsOnly: a build from before --metrics-secure, which serves
	// plain HTTP and knows no such flag.
	plainMetricsOnly bool
	// flagless: a binary that takes no flags (the lesson's operator), whose
	// metrics are on controller-runtime's default :8080.
	flagless bool
}

// start runs an operator process, its metrics and probes on free ports of
// loopback; it is killed when the test ends, if it still runs.
func (l *lesson) start(s launch) *operator {
	l.t.Helper()
	if s.kubeconfig == "" {
		s.kubeconfig = l.kubeconfig
	}
	if s.binary == "" {
		s.binary = env.operator
	}
	addrs := freeAddresses(l.t, 2)
	metrics, probes := addrs[0], addrs[1]
	o := &operator{log: filepath.Join(l.tmp, fmt.Sprintf("operator-%d-%s.log", len(l.logs)+1, s.who)), done: make(chan struct{}),
		metricsURL: "http://" + metrics, probesURL: "http://" + probes}
	flags := []string{"--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probes, "--metrics-secure=false"}
	switch {
	case s.secureMetrics:
		o.metricsURL, flags = "https://"+metrics, flags[:2]
	case s.plainMetricsOnly:
		flags = flags[:2]
	case s.flagless:
		o.metricsURL, o.probesURL, flags = "http://127.0.0.1:8080", "", nil
	}
	f, err := os.Create(o.log)
	if err != nil {
		l.t.Fatal(err)
	}
	l.logs = append(l.logs, o.log)
	o.cmd = exec.Command(s.binary, append(flags, s.args...)...)
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig)
	o.cmd.Stdout, o.cmd.Stderr = f, f
	o.startedAt = time.Now()
	if err := o.cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	go func() { o.err = o.cmd.Wait(); _ = f.Close(); close(o.done) }()
	l.t.Cleanup(func() { _ = o.cmd.Process.Kill(); <-o.done })
	l.logf("operator started as %s (pid %d, log %s)", s.who, o.cmd.Process.Pid, o.log)
	return o
}

// freeAddresses are n distinct loopback addresses free to listen on: all held
// open until chosen, so that no two are the same, and below Linux's ephemeral
// range (32768 and up), so that no outgoing connection of the operator takes
// one before it listens there.
func freeAddresses(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for tries := 0; len(addrs) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free ports on 127.0.0.1 between 20000 and 32000", n)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err != nil {
			continue // in use
		}
		defer func() { _ = l.Close() }()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
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

// logLines counts the lines of the log matching pattern.
func (o *operator) logLines(pattern string) int {
	b, _ := os.ReadFile(o.log)
	return len(regexp.MustCompile(`(?m)`+pattern).FindAll(b, -1))
}

// waitForLog waits until the operator's log matches pattern and returns when
// it first saw it.
func (l *lesson) waitForLog(o *operator, what, pattern string) time.Time {
	l.t.Helper()
	return l.waitFor(what, timeout, 20*time.Millisecond, func() error { return o.logHas(pattern) })
}

// metric adds up the samples of a Prometheus metric whose labels match (all
// of them if match is nil); -1 if the operator does not answer.
func (o *operator) metric(name string, match func(labels string) bool) float64 {
	resp, err := metricsClient.Get(o.metricsURL + "/metrics")
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		labels, value, _ := strings.Cut(strings.TrimPrefix(line, name), " ")
		if match != nil && !match(labels) {
			continue
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
		sum += v
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return sum
}

// metricsClient gives up on an operator that does not answer (a frozen one).
var metricsClient = &http.Client{Timeout: 5 * time.Second}

var writeMethod = regexp.MustCompile(`method="(POST|PUT|PATCH|DELETE)"`)

// writes is how many writes the operator's client has sent.
func (o *operator) writes() float64 {
	return o.metric("rest_client_requests_total", writeMethod.MatchString)
}

// waitMetric polls a counter until it reaches at least min, and returns when.
func (l *lesson) waitMetric(o *operator, name string, min float64) time.Time {
	l.t.Helper()
	return l.waitFor(fmt.Sprintf("%s reaches %v", name, min), 10*time.Minute, 10*time.Millisecond, func() error {
		if o.exited() {
			return errors.New("the operator exited")
		}
		if got := o.metric(name, nil); got < min {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
}

// waitIdle waits until the operator has taken every queued Promocion and
// finished reconciling it: the positive sign that it has seen, and passed
// over, what came before.
func (l *lesson) waitIdle(o *operator) {
	l.t.Helper()
	l.waitFor("the operator has nothing queued or in progress", timeout, 50*time.Millisecond, func() error {
		queued := o.metric("workqueue_depth", func(l string) bool { return strings.Contains(l, `name="promocion"`) })
		working := o.metric("controller_runtime_active_workers", func(l string) bool { return strings.Contains(l, `controller="promocion"`) })
		if queued != 0 || working != 0 {
			return fmt.Errorf("%v queued, %v reconciling", queued, working)
		}
		return nil
	})
}

// rss reads the process's peak and current resident memory, in MiB.
func (o *operator) rss(t *testing.T) (peak, now float64) {
	f, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", o.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	kb := func(field string) float64 {
		m := regexp.MustCompile(field + `:\s+(\d+) kB`).FindSubmatch(f)
		if m == nil {
			t.Fatalf("no %s in /proc/%d/status", field, o.cmd.Process.Pid)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v / 1024
	}
	return kb("VmHWM"), kb("VmRSS")
}

// ----- the API server's audit log -----

// request is one write in the API server's audit log (hack/cluster.sh logs
// every create, update, patch and delete).
type request struct {
	at                time.Time
	user, userAgent   string
	verb, uri, object string // object: resource/namespace/name
	code              int
}

func (r request) String() string {
	return fmt.Sprintf("%s %s %s -> %d", r.at.Format(time.StampMicro), r.verb, r.uri, r.code)
}

// audit returns the writes logged after t that keep says to.
func (l *lesson) audit(t time.Time, keep func(request) bool) []request {
	l.t.Helper()
	f, err := os.Open(filepath.Join(env.clusterDir, "logs", "audit.log"))
	if err != nil {
		l.t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	return readAudit(f, t, keep)
}

// readAudit reads audit log lines from r: the writes logged after t that
// keep says to.
func readAudit(r io.Reader, t time.Time, keep func(request) bool) []request {
	var rs []request
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Verb, RequestURI, UserAgent string
			User                        struct{ Username string }
			ObjectRef                   struct{ Resource, Namespace, Name string }
			ResponseStatus              struct{ Code int }
			Received                    metav1.MicroTime `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || !e.Received.After(t) {
			continue
		}
		r := request{e.Received.Time, e.User.Username, e.UserAgent, e.Verb, strings.Split(e.RequestURI, "?")[0],
			e.ObjectRef.Resource + "/" + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name, e.ResponseStatus.Code}
		if keep(r) {
			rs = append(rs, r)
		}
	}
	return rs
}

// operatorWrites are the writes of operators after t: their user agent is the
// operator's name, whatever identity they run as.
func (l *lesson) operatorWrites(t time.Time) []request {
	return l.audit(t, func(r request) bool { return r.userAgent == "operador-promociones" })
}

// auditSize is where the audit log ends now: auditFrom reads from there, so
// that each run reads only its own part of a log that grows by millions of lines.
func (l *lesson) auditSize() int64 {
	st, err := os.Stat(filepath.Join(env.clusterDir, "logs", "audit.log"))
	if err != nil {
		l.t.Fatal(err)
	}
	return st.Size()
}

// auditFrom is the writes logged after offset that keep says to. If the API server
// rotated the log since (--audit-log-maxsize), the rest of the older file
// is read first.
func (l *lesson) auditFrom(offset int64, keep func(request) bool) []request {
	dir := filepath.Join(env.clusterDir, "logs")
	read := func(name string, from int64) []request {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			l.t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if _, err := f.Seek(from, 0); err != nil {
			l.t.Fatal(err)
		}
		return readAudit(f, time.Time{}, keep)
	}
	if st, err := os.Stat(filepath.Join(dir, "audit.log")); err == nil && st.Size() >= offset {
		return read("audit.log", offset)
	}
	rotated, _ := filepath.Glob(filepath.Join(dir, "audit-*.log")) // named by time: the last is the newest
	if len(rotated) == 0 {
		l.t.Fatal("the audit log is shorter than before and no rotated file is there")
	}
	return append(read(filepath.Base(rotated[len(rotated)-1]), offset), read("audit.log", 0)...)
}

// auditFlushed waits until the audit log holds a write made now, so that it
// holds every write made before.
func (l *lesson) auditFlushed() {
	l.t.Helper()
	// Named here: the audit log names no object the API server named itself (generateName).
	sentinel := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": fmt.Sprintf("auditoria-%d", time.Now().UnixNano()), "namespace": "default"}}}
	from := l.auditSize() // the sentinel's line comes after: what is before need not be read again
	if err := l.c.Create(context.Background(), sentinel); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { _ = l.c.Delete(context.Background(), sentinel) })
	l.eventually("the audit log is written up to now", func() error {
		if len(l.auditFrom(from, func(r request) bool { return strings.HasSuffix(r.object, "/"+sentinel.GetName()) })) == 0 {
			return errors.New("not yet")
		}
		return nil
	})
}

// oracle lists how ns differs from what a fresh operator, running with the
// web image image ("" for the default), would make of its Promociones
// (oracle.go, a test-only build of the operator's own code).
func (l *lesson) oracle(ns, image string) []string {
	l.t.Helper()
	args := []string{"-oracle", ns}
	if image != "" {
		args = append(args, image)
	}
	cmd := exec.Command(env.oracle, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+l.kubeconfig)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) { // 1: the world differs
		l.t.Fatalf("the oracle: %v\n%s", err, out)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// ----- namespaces and Promociones -----

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
	if err := parallelErr(n, workers, f); err != nil {
		l.t.Fatal(err)
	}
}

// parallelErr is parallel for another goroutine than the test's: it returns
// the first error.
func parallelErr(n, workers int, f func(i int) error) error {
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
	return <-errs
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

// listo counts the Promociones of ns that are Listo.
func (l *lesson) listo(ns string) int {
	out, _ := l.tryKubectl("get", "promociones", "-n", ns, "-o", "jsonpath={range .items[*]}{.status.fase}{\"\\n\"}{end}")
	return strings.Count(out, "Listo")
}

// waitListo waits until n Promociones of ns are Listo.
func (l *lesson) waitListo(ns string, n int) {
	l.t.Helper()
	l.eventually(fmt.Sprintf("%d Promociones Listo in %s", n, ns), func() error {
		if got := l.listo(ns); got != n {
			return fmt.Errorf("%d of %d Listo", got, n)
		}
		return nil
	})
}

// serviceAccountKubeconfig writes a kubeconfig holding a token for the
// ServiceAccount sa of default, as a Pod running as sa would have.
func (l *lesson) serviceAccountKubeconfig(sa string) string {
	l.t.Helper()
	token := l.kubectl("create", "token", sa, "-n", "default", "--duration=3h")
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

func httpGet(t *testing.T, url string) string {
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

// loadOperatorImage builds the operator's image, as make image does, for this
// machine's platform, and loads it into node-real's containerd, once a run:
// the tests that run it share it.
func (l *lesson) loadOperatorImage(tag string) {
	l.t.Helper()
	if _, loaded := imagesLoaded.Load(tag); loaded {
		l.logf("%s is on node-real, loaded by an earlier test", tag)
		return
	}
	tarball := filepath.Join(l.tmp, "operador.tar")
	build := exec.Command("go", "run", ".", "operator", "-repo", l.root, "-platforms", "linux/"+runtime.GOARCH, "-tag", tag, "-o", tarball)
	build.Dir = filepath.Join(l.root, "hack", "image")
	if out, err := build.CombinedOutput(); err != nil {
		l.t.Fatalf("building the image: %v\n%s", err, out)
	}
	if out, err := clusterSh("load", tarball).CombinedOutput(); err != nil {
		l.t.Fatalf("hack/cluster.sh load: %v\n%s", err, out)
	}
	imagesLoaded.Store(tag, true)
	l.logf("%s is on node-real", tag)
}

var imagesLoaded sync.Map // tag: true

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
