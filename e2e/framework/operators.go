package framework

// Operator processes: starting one as a test's identity, its logs, its
// metrics and its memory, and the image a test runs in the cluster.

import (
	"bufio"
	"crypto/tls"
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
)

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
func (h *Harness) Start(s Launch) *Operator {
	h.T.Helper()
	if s.Kubeconfig == "" {
		s.Kubeconfig = h.Kubeconfig
	}
	if s.Binary == "" {
		s.Binary = h.Operator
	}
	addrs := FreeAddresses(h.T, 2)
	metrics, probes := addrs[0], addrs[1]
	o := &Operator{Log: filepath.Join(h.Tmp, fmt.Sprintf("operator-%d-%s.log", len(h.logs)+1, s.Who)), Done: make(chan struct{}),
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
		h.T.Fatal(err)
	}
	h.logs, h.operators = append(h.logs, o.Log), append(h.operators, o)
	o.Cmd = exec.Command(s.Binary, append(flags, s.Args...)...)
	o.Cmd.Env = append(append(os.Environ(), s.Env...), "KUBECONFIG="+s.Kubeconfig)
	o.Cmd.Stdout, o.Cmd.Stderr = f, f
	o.StartedAt = time.Now()
	if err := o.Cmd.Start(); err != nil {
		h.T.Fatal(err)
	}
	go func() { o.Err = o.Cmd.Wait(); _ = f.Close(); close(o.Done) }()
	h.T.Cleanup(func() { _ = o.Cmd.Process.Kill(); <-o.Done })
	h.Logf("operator started as %s (pid %d, log %s)", s.Who, o.Cmd.Process.Pid, o.Log)
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
func (h *Harness) DumpRunning() {
	h.T.Helper()
	for _, o := range h.operators {
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
		h.T.Logf("operator %s (pid %d), its queue and workers now:\n%s", filepath.Base(o.Log), o.Cmd.Process.Pid, strings.Join(lines, "\n"))
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
func (h *Harness) WaitForLog(o *Operator, what, pattern string) time.Time {
	h.T.Helper()
	return h.WaitFor(what, WaitTimeout, 20*time.Millisecond, func() error { return o.LogHas(pattern) })
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
func (h *Harness) WaitMetric(o *Operator, name string, min float64) time.Time {
	h.T.Helper()
	return h.WaitFor(fmt.Sprintf("%s reaches %v", name, min), 10*time.Minute, 10*time.Millisecond, func() error {
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
func (h *Harness) WaitIdle(o *Operator) {
	h.T.Helper()
	h.WaitFor("the operator has nothing queued or in progress", WaitTimeout, 50*time.Millisecond, func() error {
		queued := o.Metric("workqueue_depth", func(h string) bool { return strings.Contains(h, `name="promocion"`) })
		working := o.Metric("controller_runtime_active_workers", func(h string) bool { return strings.Contains(h, `controller="promocion"`) })
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

// OperatorImage builds the operator's image, as make image does, for this
// machine's platform, named tag, once a run, and returns its tarball.
func (h *Harness) OperatorImage(tag string) string {
	h.T.Helper()
	if tarball, built := imagesBuilt.Load(tag); built {
		return tarball.(string)
	}
	tarball := filepath.Join(h.ClusterDir, strings.NewReplacer("/", "_", ":", "_").Replace(tag)+".tar")
	build := exec.Command("go", "run", ".", "operator", "-repo", h.Root, "-platforms", "linux/"+runtime.GOARCH, "-tag", tag, "-o", tarball)
	build.Dir = filepath.Join(h.Root, "hack", "image")
	if out, err := build.CombinedOutput(); err != nil {
		h.T.Fatalf("building the image: %v\n%s", err, out)
	}
	imagesBuilt.Store(tag, tarball)
	return tarball
}

var imagesBuilt sync.Map // tag: tarball
