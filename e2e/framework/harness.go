package framework

// A Lesson is a test's view of its suite's cluster (kubectl, a client, a
// folder for logs); it starts operator processes, waits for things to become
// true, and reads what the operator and the API server recorded (metrics,
// logs, the audit log).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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

// Lesson is one test's view of its suite's cluster.
type Lesson struct {
	T          testing.TB
	Root, Tmp  string
	KubectlBin string
	Kubeconfig string
	logs       []string         // every operator log file, dumped if the test fails
	operators  []*Operator      // every operator started, for DumpRunning
	C          client.WithWatch // the admin's client
}

// NewLesson gives a test the shared cluster, a folder for its logs, and a dump
// of the operator's logs and the cluster's state if it fails.
func NewLesson(t testing.TB) *Lesson {
	l := &Lesson{T: t, Root: Env.Root, Tmp: t.TempDir(), KubectlBin: Env.KubectlBin, Kubeconfig: Env.Kubeconfig}
	t.Cleanup(l.dumpOnFailure)
	l.C = l.ClientFor(l.Kubeconfig)
	return l
}

// RestConfig is kubeconfig's connection and identity.
func (l *Lesson) RestConfig(kubeconfig string) *rest.Config {
	l.T.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		l.T.Fatal(err)
	}
	return cfg
}

// ClientFor is a client with kubeconfig's identity and, like the operator, no
// client-side rate limit. Every client of the tests is made here.
func (l *Lesson) ClientFor(kubeconfig string) client.WithWatch {
	l.T.Helper()
	cfg := l.RestConfig(kubeconfig)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		l.T.Fatal(err)
	}
	return c
}

func (l *Lesson) Step(n, title string) {
	l.T.Helper()
	l.T.Logf("===== Step %s: %s", n, title)
}

func (l *Lesson) Logf(format string, args ...any) {
	l.T.Helper()
	l.T.Logf("    "+format, args...)
}

func (l *Lesson) TryKubectl(args ...string) (string, error) {
	cmd := exec.Command(l.KubectlBin, append([]string{"--kubeconfig", l.Kubeconfig}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), err
}

// CanI is kubectl auth can-i as user: "yes" or "no".
func (l *Lesson) CanI(user string, args ...string) string {
	out, _ := l.TryKubectl(append(append([]string{"auth", "can-i"}, args...), "--as="+user)...) // exit 1 for "no"
	return out
}

func (l *Lesson) ExpectCanI(user, want string, args ...string) {
	l.T.Helper()
	if got := l.CanI(user, args...); got != want {
		l.T.Errorf("kubectl auth can-i %s --as=%s: %q, want %q", strings.Join(args, " "), user, got, want)
	}
}

// RunCombined runs a command and returns its stdout and stderr together:
// kubectl prints admission warnings on stderr.
func RunCombined(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// Kubectl runs Kubectl as the admin, failing the test if it fails.
func (l *Lesson) Kubectl(args ...string) string {
	l.T.Helper()
	out, err := l.TryKubectl(args...)
	if err != nil {
		l.T.Fatal(err)
	}
	return out
}

// ----- waiting -----

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
func (l *Lesson) WaitFor(what string, within, every time.Duration, check func() error) time.Time {
	l.T.Helper()
	if err := Poll(within, every, check); err != nil {
		l.T.Fatalf("%s: not true after %s: %v", what, within, err)
	}
	l.Logf("ok: %s", what)
	return time.Now()
}

func (l *Lesson) Eventually(what string, check func() error) {
	l.T.Helper()
	l.WaitFor(what, WaitTimeout, 100*time.Millisecond, check)
}

func (l *Lesson) dumpOnFailure() {
	if !l.T.Failed() {
		return
	}
	for _, f := range l.logs {
		b, _ := os.ReadFile(f)
		l.T.Logf("----- operator log %s -----\n%s", filepath.Base(f), b)
	}
	// With the API server gone, kubectl has nothing to say, and what CI
	// shows of a failure is its end: say so once, and end with the control
	// plane's own last words instead.
	if _, err := l.TryKubectl("get", "--raw", "/readyz"); err != nil {
		l.T.Logf("----- the API server does not answer (%v); the control plane's logs end with -----", err)
		l.LogControlPlane(15)
		return
	}
	l.LogKubectl(
		[]string{"get", "all,cm,promociones", "-o", "wide"},
		[]string{"get", "events", "--sort-by=.lastTimestamp"},
		[]string{"logs", "-l", "app=operador-promociones", "--tail=100", "--prefix"}, // the operator's Pods, if it ran in the cluster
	)
}

// LogKubectl logs what each kubectl command prints, under its command line,
// failed or not: a dump on failure.
func (l *Lesson) LogKubectl(commands ...[]string) {
	for _, args := range commands {
		out, err := l.TryKubectl(args...)
		l.T.Logf("----- kubectl %s -----\n%s %v", strings.Join(args, " "), out, err)
	}
}

// LogControlPlane logs the last n lines of each of the cluster's logs but
// the audit log (the requests, not what went wrong).
func (l *Lesson) LogControlPlane(n int) {
	logs, _ := filepath.Glob(filepath.Join(Env.ClusterDir, "logs", "*.log"))
	for _, f := range logs {
		if filepath.Base(f) == "audit.log" {
			continue
		}
		b, _ := os.ReadFile(f)
		l.T.Logf("----- %s -----\n%s", filepath.Base(f), LastLines(string(b), n))
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

// ----- operator processes -----

// Operator is a running Operator process.
type Operator struct {
	Cmd                   *exec.Cmd
	Log                   string
	StartedAt             time.Time
	MetricsURL, ProbesURL string // http://127.0.0.1:port
	// MetricsToken, when set, is sent with every read of a SecureMetrics
	// operator's endpoint (its self-signed certificate taken as it is).
	MetricsToken string
	Done         chan struct{}
	Err          error
}

// Get reads path from the operator's metrics endpoint, with its token if set.
func (o *Operator) Get(path string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, o.MetricsURL+path, nil)
	if err != nil {
		return nil, err
	}
	if o.MetricsToken != "" {
		req.Header.Set("Authorization", "Bearer "+o.MetricsToken)
	}
	return metricsClient.Do(req)
}

// Launch is an operator process to start.
type Launch struct {
	Who        string // names its log
	Kubeconfig string // default: the admin's
	Binary     string // default: the operator built for the tests
	Args       []string
	Env        []string // added to the test's environment
	// SecureMetrics serves /metrics as in production, over HTTPS to
	// authorized tokens; by default the tests read it in plain HTTP.
	SecureMetrics bool
	// PlainMetricsOnly: a build from before --metrics-secure, which serves
	// plain HTTP and knows no such flag.
	PlainMetricsOnly bool
	// Flagless: a binary that takes no flags (the lesson's operator), whose
	// metrics are on controller-runtime's default :8080.
	Flagless bool
}

// Start runs an operator process, its metrics and probes on free ports of
// loopback; it is killed when the test ends, if it still runs.
func (l *Lesson) Start(s Launch) *Operator {
	l.T.Helper()
	if s.Kubeconfig == "" {
		s.Kubeconfig = l.Kubeconfig
	}
	if s.Binary == "" {
		s.Binary = Env.Operator
	}
	addrs := FreeAddresses(l.T, 2)
	metrics, probes := addrs[0], addrs[1]
	o := &Operator{Log: filepath.Join(l.Tmp, fmt.Sprintf("operator-%d-%s.log", len(l.logs)+1, s.Who)), Done: make(chan struct{}),
		MetricsURL: "http://" + metrics, ProbesURL: "http://" + probes}
	flags := []string{"--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probes, "--metrics-secure=false"}
	switch {
	case s.SecureMetrics:
		o.MetricsURL, flags = "https://"+metrics, flags[:2]
	case s.PlainMetricsOnly:
		flags = flags[:2]
	case s.Flagless:
		o.MetricsURL, o.ProbesURL, flags = "http://127.0.0.1:8080", "", nil
	}
	f, err := os.Create(o.Log)
	if err != nil {
		l.T.Fatal(err)
	}
	l.logs, l.operators = append(l.logs, o.Log), append(l.operators, o)
	o.Cmd = exec.Command(s.Binary, append(flags, s.Args...)...)
	o.Cmd.Env = append(append(os.Environ(), s.Env...), "KUBECONFIG="+s.Kubeconfig)
	o.Cmd.Stdout, o.Cmd.Stderr = f, f
	o.StartedAt = time.Now()
	if err := o.Cmd.Start(); err != nil {
		l.T.Fatal(err)
	}
	go func() { o.Err = o.Cmd.Wait(); _ = f.Close(); close(o.Done) }()
	l.T.Cleanup(func() { _ = o.Cmd.Process.Kill(); <-o.Done })
	l.Logf("operator started as %s (pid %d, log %s)", s.Who, o.Cmd.Process.Pid, o.Log)
	return o
}

// FreeAddresses are n distinct loopback addresses free to listen on: all held
// open until chosen, so that no two are the same, and below Linux's ephemeral
// range (32768 and up), so that no outgoing connection of the operator takes
// one before it listens there.
func FreeAddresses(t testing.TB, n int) []string {
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

// DumpRunning is for a test that found an operator not doing its work: it
// logs each running operator's queue and workers as its metrics show them,
// then sends it SIGQUIT, whose dump of every goroutine ends its log (which
// the test's failure prints). Whether a stuck operator waits in its queue, in
// a reconcile or on the API server is then on record.
func (l *Lesson) DumpRunning() {
	l.T.Helper()
	for _, o := range l.operators {
		if o.Exited() {
			continue
		}
		var lines []string
		if resp, err := o.Get("/metrics"); err != nil {
			lines = append(lines, err.Error())
		} else {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			for line := range strings.Lines(string(body)) {
				if !strings.HasPrefix(line, "#") && (strings.HasPrefix(line, "workqueue_") || strings.HasPrefix(line, "controller_runtime_active_workers") ||
					strings.HasPrefix(line, "controller_runtime_reconcile_total") || strings.HasPrefix(line, "promociones_routine")) {
					lines = append(lines, strings.TrimSpace(line))
				}
			}
		}
		l.T.Logf("operator %s (pid %d), its queue and workers now:\n%s", filepath.Base(o.Log), o.Cmd.Process.Pid, strings.Join(lines, "\n"))
		_ = o.Cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-o.Done:
		case <-time.After(10 * time.Second):
		}
	}
}

func (o *Operator) Exited() bool {
	select {
	case <-o.Done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, as the kubelet would, and expects a clean exit.
func (o *Operator) Stop(t testing.TB) {
	t.Helper()
	_ = o.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.Done:
		if o.Err != nil {
			t.Errorf("the operator exited with %v after SIGTERM, want 0", o.Err)
		}
	case <-time.After(time.Minute):
		t.Errorf("the operator did not exit within a minute of SIGTERM")
	}
}

// FirstLine is the first line of the log matching pattern ("" for the first line).
func (o *Operator) FirstLine(pattern string) string {
	b, _ := os.ReadFile(o.Log)
	return FirstMatch(string(b), pattern)
}

// FirstMatch is the first line of s matching pattern, or "".
func FirstMatch(s, pattern string) string {
	re := regexp.MustCompile(pattern)
	for line := range strings.SplitSeq(s, "\n") {
		if re.MatchString(line) {
			return line
		}
	}
	return ""
}

// LogHas reports an error unless the log matches every pattern.
func (o *Operator) LogHas(patterns ...string) error {
	b, _ := os.ReadFile(o.Log)
	for _, p := range patterns {
		if !regexp.MustCompile(p).Match(b) {
			return fmt.Errorf("the log has no line matching %q", p)
		}
	}
	return nil
}

// LogLines counts the lines of the log matching pattern.
func (o *Operator) LogLines(pattern string) int {
	b, _ := os.ReadFile(o.Log)
	return len(regexp.MustCompile(`(?m)`+pattern).FindAll(b, -1))
}

// WaitForLog waits until the operator's log matches pattern and returns when
// it first saw it.
func (l *Lesson) WaitForLog(o *Operator, what, pattern string) time.Time {
	l.T.Helper()
	return l.WaitFor(what, WaitTimeout, 20*time.Millisecond, func() error { return o.LogHas(pattern) })
}

// Metric adds up the samples of a Prometheus Metric whose labels match (all
// of them if match is nil); -1 if the operator does not answer.
func (o *Operator) Metric(name string, match func(labels string) bool) float64 {
	resp, err := o.Get("/metrics")
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

// metricsClient gives up on an operator that does not answer (a frozen one),
// and takes a SecureMetrics operator's self-signed certificate as it is.
var metricsClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // an operator's self-signed certificate, on loopback
}}

var writeMethod = regexp.MustCompile(`method="(POST|PUT|PATCH|DELETE)"`)

// Writes is how many Writes the operator's client has sent.
func (o *Operator) Writes() float64 {
	return o.Metric("rest_client_requests_total", writeMethod.MatchString)
}

// WaitMetric polls a counter until it reaches at least min, and returns when.
func (l *Lesson) WaitMetric(o *Operator, name string, min float64) time.Time {
	l.T.Helper()
	return l.WaitFor(fmt.Sprintf("%s reaches %v", name, min), 10*time.Minute, 10*time.Millisecond, func() error {
		if o.Exited() {
			return errors.New("the operator exited")
		}
		if got := o.Metric(name, nil); got < min {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
}

// WaitIdle waits until the operator has taken every queued Promocion and
// finished reconciling it: the positive sign that it has seen, and passed
// over, what came before.
func (l *Lesson) WaitIdle(o *Operator) {
	l.T.Helper()
	l.WaitFor("the operator has nothing queued or in progress", WaitTimeout, 50*time.Millisecond, func() error {
		queued := o.Metric("workqueue_depth", func(l string) bool { return strings.Contains(l, `name="promocion"`) })
		working := o.Metric("controller_runtime_active_workers", func(l string) bool { return strings.Contains(l, `controller="promocion"`) })
		if queued != 0 || working != 0 {
			return fmt.Errorf("%v queued, %v reconciling", queued, working)
		}
		return nil
	})
}

// RSS reads the process's peak and current resident memory, in MiB.
func (o *Operator) RSS(t testing.TB) (peak, now float64) {
	m := o.memory(t)
	return m("VmHWM"), m("VmRSS")
}

// RSSParts reads the process's current resident memory in its two parts, in
// MiB: anonymous (the heap, stacks, the runtime's own) and file-backed (the
// binary's pages that it has touched).
func (o *Operator) RSSParts(t testing.TB) (anon, file float64) {
	m := o.memory(t)
	return m("RssAnon"), m("RssFile")
}

// memory reads /proc/<pid>/status, and returns a reader of its fields in MiB.
func (o *Operator) memory(t testing.TB) func(field string) float64 {
	f, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", o.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	kb := func(field string) float64 {
		m := regexp.MustCompile(field + `:\s+(\d+) kB`).FindSubmatch(f)
		if m == nil {
			t.Fatalf("no %s in /proc/%d/status", field, o.Cmd.Process.Pid)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v / 1024
	}
	return kb
}

// ----- the API server's audit log -----

// Request is one write in the API server's audit log (hack/cluster.sh logs
// every create, update, patch and delete).
type Request struct {
	At, Done          time.Time // received, and answered
	User, UserAgent   string
	Verb, URI, Object string // object: resource/namespace/name
	Code              int
}

func (r Request) String() string {
	return fmt.Sprintf("%s %s %s -> %d in %s", r.At.Format(time.StampMicro), r.Verb, r.URI, r.Code, Ms(r.Done.Sub(r.At)))
}

// Audit returns the writes logged after t that keep says to.
func (l *Lesson) Audit(t time.Time, keep func(Request) bool) []Request {
	l.T.Helper()
	f, err := os.Open(filepath.Join(Env.ClusterDir, "logs", "audit.log"))
	if err != nil {
		l.T.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	return ReadAudit(f, t, keep)
}

// ReadAudit reads audit log lines from r: the writes logged after t that
// keep says to.
func ReadAudit(r io.Reader, t time.Time, keep func(Request) bool) []Request {
	var rs []Request
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Verb, RequestURI, UserAgent string
			User                        struct{ Username string }
			ObjectRef                   struct{ Resource, Namespace, Name string }
			ResponseStatus              struct{ Code int }
			Received                    metav1.MicroTime `json:"requestReceivedTimestamp"`
			Stage                       metav1.MicroTime `json:"stageTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || !e.Received.After(t) {
			continue
		}
		r := Request{e.Received.Time, e.Stage.Time, e.User.Username, e.UserAgent, e.Verb, strings.Split(e.RequestURI, "?")[0],
			e.ObjectRef.Resource + "/" + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name, e.ResponseStatus.Code}
		if keep(r) {
			rs = append(rs, r)
		}
	}
	return rs
}

// OperatorWrites are the writes of operators after t: their user agent is the
// operator's name, whatever identity they run as.
func (l *Lesson) OperatorWrites(t time.Time) []Request {
	return l.Audit(t, func(r Request) bool { return r.UserAgent == "operador-promociones" })
}

// AuditSize is where the audit log ends now: auditFrom reads from there, so
// that each run reads only its own part of a log that grows by millions of lines.
func (l *Lesson) AuditSize() int64 {
	st, err := os.Stat(filepath.Join(Env.ClusterDir, "logs", "audit.log"))
	if err != nil {
		l.T.Fatal(err)
	}
	return st.Size()
}

// AuditFrom is the writes logged after offset that keep says to. If the API server
// rotated the log since (--audit-log-maxsize), the rest of the older file
// is read first.
func (l *Lesson) AuditFrom(offset int64, keep func(Request) bool) []Request {
	dir := filepath.Join(Env.ClusterDir, "logs")
	read := func(name string, from int64) []Request {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			l.T.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if _, err := f.Seek(from, 0); err != nil {
			l.T.Fatal(err)
		}
		return ReadAudit(f, time.Time{}, keep)
	}
	if st, err := os.Stat(filepath.Join(dir, "audit.log")); err == nil && st.Size() >= offset {
		return read("audit.log", offset)
	}
	rotated, _ := filepath.Glob(filepath.Join(dir, "audit-*.log")) // named by time: the last is the newest
	if len(rotated) == 0 {
		l.T.Fatal("the audit log is shorter than before and no rotated file is there")
	}
	return append(read(filepath.Base(rotated[len(rotated)-1]), offset), read("audit.log", 0)...)
}

// AuditFlushed waits until the audit log holds a write made now, so that it
// holds every write made before.
func (l *Lesson) AuditFlushed() {
	l.T.Helper()
	// Named here: the audit log names no object the API server named itself (generateName).
	sentinel := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": fmt.Sprintf("auditoria-%d", time.Now().UnixNano()), "namespace": "default"}}}
	from := l.AuditSize() // the sentinel's line comes after: what is before need not be read again
	if err := l.C.Create(context.Background(), sentinel); err != nil {
		l.T.Fatal(err)
	}
	l.T.Cleanup(func() { _ = l.C.Delete(context.Background(), sentinel) })
	l.Eventually("the audit log is written up to now", func() error {
		if len(l.AuditFrom(from, func(r Request) bool { return strings.HasSuffix(r.Object, "/"+sentinel.GetName()) })) == 0 {
			return errors.New("not yet")
		}
		return nil
	})
}

// Oracle lists how ns differs from what the specification says its
// Promociones make (oracle.go's facts).
func (l *Lesson) Oracle(ns string) []Problem {
	l.T.Helper()
	problems, err := Judge(context.Background(), l.C, ns)
	if err != nil {
		l.T.Fatalf("the oracle: %v", err)
	}
	return problems
}

// ----- namespaces and Promociones -----

// Namespace creates a Namespace whose Pods go to kwok's nodes: the tests that
// make hundreds of them, or that need no process behind them, use it.
func (l *Lesson) Namespace(name string) string {
	l.Kubectl("create", "namespace", name)
	l.Kubectl("annotate", "namespace", name, "scheduler.alpha.kubernetes.io/node-selector=type=kwok")
	return name
}

// DeleteNamespace deletes ns and waits until it is gone, so that its garbage
// collection does not weigh on the next measurement.
func (l *Lesson) DeleteNamespace(ns string) {
	l.Kubectl("delete", "namespace", ns, "--timeout=10m")
}

// Parallel runs f(0..n-1) on workers goroutines, failing the test on an error.
// An object that already exists is not one.
func (l *Lesson) Parallel(n, workers int, f func(i int) error) {
	l.T.Helper()
	if err := ParallelErr(n, workers, f); err != nil {
		l.T.Fatal(err)
	}
}

// ParallelErr is parallel for another goroutine than the test's: it returns
// the first error.
func ParallelErr(n, workers int, f func(i int) error) error {
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

// CreatePromociones creates promo-0 to promo-<n-1> in ns, 32 at a time.
func (l *Lesson) CreatePromociones(ns string, n, replicas int) {
	l.Parallel(n, 32, func(i int) error {
		return l.C.Create(context.Background(), Promocion(ns, i, replicas))
	})
}

func Promocion(ns string, i, replicas int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tienda.example.com/v1", "kind": "Promocion",
		"metadata": map[string]any{"name": fmt.Sprintf("promo-%d", i), "namespace": ns},
		"spec":     map[string]any{"banner": fmt.Sprintf("Oferta número %d", i), "replicas": int64(replicas)},
	}}
}

// Listo counts the Promociones of ns that are Listo.
func (l *Lesson) Listo(ns string) int {
	out, _ := l.TryKubectl("get", "promociones", "-n", ns, "-o", "jsonpath={range .items[*]}{.status.fase}{\"\\n\"}{end}")
	return strings.Count(out, "Listo")
}

// WaitListo waits until n Promociones of ns are Listo.
func (l *Lesson) WaitListo(ns string, n int) {
	l.T.Helper()
	l.Eventually(fmt.Sprintf("%d Promociones Listo in %s", n, ns), func() error {
		if got := l.Listo(ns); got != n {
			return fmt.Errorf("%d of %d Listo", got, n)
		}
		return nil
	})
}

// ServiceAccountKubeconfig writes a kubeconfig holding a token for the
// ServiceAccount sa of default, as a Pod running as sa would have.
func (l *Lesson) ServiceAccountKubeconfig(sa string) string {
	l.T.Helper()
	return l.ServiceAccountKubeconfigIn("default", sa)
}

// ServiceAccountKubeconfigIn is ServiceAccountKubeconfig for the ServiceAccount sa of ns.
func (l *Lesson) ServiceAccountKubeconfigIn(ns, sa string) string {
	l.T.Helper()
	token := l.Kubectl("create", "token", sa, "-n", ns, "--duration=3h")
	return l.writeKubeconfig(ns+"-"+sa, fmt.Sprintf("{token: %q}", token))
}

// writeKubeconfig writes name.kubeconfig for the cluster that kubectl talks
// to, with user (the kubeconfig's user block, inline) as its one user.
func (l *Lesson) writeKubeconfig(name, user string) string {
	l.T.Helper()
	server := l.Kubectl("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.server}")
	ca := l.Kubectl("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	path := filepath.Join(l.Tmp, name+".kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: %s, user: %s}]
contexts: [{name: local, context: {cluster: local, user: %s, namespace: default}}]
current-context: local
`, server, ca, name, user, name)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		l.T.Fatal(err)
	}
	return path
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

// OperatorImage builds the operator's image, as make image does, for this
// machine's platform, named tag, once a run, and returns its tarball.
func (l *Lesson) OperatorImage(tag string) string {
	l.T.Helper()
	if tarball, built := imagesBuilt.Load(tag); built {
		return tarball.(string)
	}
	tarball := filepath.Join(Env.ClusterDir, strings.NewReplacer("/", "_", ":", "_").Replace(tag)+".tar")
	build := exec.Command("go", "run", ".", "operator", "-repo", l.Root, "-platforms", "linux/"+runtime.GOARCH, "-tag", tag, "-o", tarball)
	build.Dir = filepath.Join(l.Root, "hack", "image")
	if out, err := build.CombinedOutput(); err != nil {
		l.T.Fatalf("building the image: %v\n%s", err, out)
	}
	imagesBuilt.Store(tag, tarball)
	return tarball
}

var imagesBuilt sync.Map // tag: tarball

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

// ----- shared by the suites -----

// Splice writes report into file between the lines <!-- NAME begins --> and
// <!-- NAME ends -->, keeping the rest; a file not there yet is made with
// them, and one without them is left alone, with an error.
func Splice(file, name, report string) error {
	begin, end := "<!-- "+name+" begins -->\n", "<!-- "+name+" ends -->\n"
	old, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return os.WriteFile(file, []byte(begin+report+end), 0o644)
	}
	if err != nil {
		return err
	}
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		// Never the whole file in its place: what is around the report is someone's writing.
		return fmt.Errorf("%s has no %q and %q to write the report between", file, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	out := append(append(append([]byte{}, old[:i+len(begin)]...), report...), old[j:]...)
	return os.WriteFile(file, out, 0o644)
}

// Commit is the commit a run runs on, for its report ("ran on commit ...",
// which hack/report-age.sh reads): HEAD, and whether the product's files
// differ from it.
func Commit() string {
	out, err := exec.Command("git", "-C", Env.Root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	commit := strings.TrimSpace(string(out))
	dirty, _ := exec.Command("git", "-C", Env.Root, "status", "--porcelain", "--", ":(glob)*.go", "go.mod", "go.sum", "Dockerfile", "manifiestos").Output()
	if len(bytes.TrimSpace(dirty)) > 0 {
		commit += ", with uncommitted changes to the product"
	}
	return commit
}

// First is at most the First n of s.
func First[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// Ms prints a duration in milliseconds, or seconds from 10 s up.
func Ms(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// Identity makes a ServiceAccount of default with the operator's RBAC from
// manifiestos/rbac.yaml (the ClusterRole, and the Lease's Role in default), so
// that the API server sees the operator as a production install would: not
// system:masters, and subject to API Priority and Fairness.
// Everything goes away when the test ends: the lesson starts without RBAC.
func (l *Lesson) Identity(name string) {
	l.T.Helper()
	rbac := filepath.Join(l.Root, "manifiestos", "rbac.yaml")
	l.Kubectl("apply", "-f", rbac)
	l.Kubectl("create", "serviceaccount", name, "-n", "default")
	l.Kubectl("create", "clusterrolebinding", "caos-"+name, "--clusterrole=operador-promociones", "--serviceaccount=default:"+name)
	l.Kubectl("create", "rolebinding", "caos-"+name, "-n", "default", "--role=operador-promociones-leader-election", "--serviceaccount=default:"+name)
	l.T.Cleanup(func() {
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "serviceaccount/"+name, "rolebinding/caos-"+name, "-n", "default")
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "clusterrolebinding/caos-"+name)
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "-f", rbac)
	})
}

// LeaseAcquired is when the operator's Lease in default was last taken.
func (l *Lesson) LeaseAcquired() time.Time {
	out := l.Kubectl("get", "lease", "operador-promociones", "-n", "default", "-o", "jsonpath={.spec.acquireTime}")
	t, err := time.Parse(time.RFC3339Nano, out)
	if err != nil {
		l.T.Fatalf("the Lease's acquireTime %q: %v", out, err)
	}
	return t
}

// RecreationTime deletes obj and returns the time until the watch shows a new
// one (another UID): the operator's, or the one recreate makes once the
// delete has returned.
func RecreationTime(t testing.TB, c client.WithWatch, list client.ObjectList, obj client.Object, recreate func() error) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	old := obj.GetUID()
	w, err := c.Watch(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{"metadata.name": obj.GetName()},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: obj.GetResourceVersion()}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if err := c.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if recreate != nil {
		if err := recreate(); err != nil {
			t.Fatal(err)
		}
	}
	for ev := range w.ResultChan() {
		if o, ok := ev.Object.(client.Object); ok && ev.Type == watch.Added && o.GetUID() != old {
			return time.Since(start)
		}
	}
	t.Fatalf("%s %s did not come back within %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), WaitTimeout)
	return 0
}
