package chaos

// A fault proxy between an operator and the API server. The operator's
// kubeconfig names the proxy, in plain HTTP on loopback; the proxy speaks TLS
// to the API server with a ServiceAccount's token (client-go sends no token
// over plain HTTP, so the proxy holds it). Every request of the operator goes
// through it, and the tests make it:
//   - count the operator's mutating requests and run a hook right before or
//     right after forwarding the k-th (a crash point);
//   - delay every watch event, or hold the watch streams and release them;
//   - serve an informer's first list from an older resourceVersion;
//   - add latency, cut watches, answer 429 or 410, or swallow every request.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faults is what the proxy does to the requests passing it. The zero value
// passes them all untouched.
type faults struct {
	// crash is called right before forwarding a mutating request (before is
	// true), and right after the API server answered it but before the answer
	// goes back, with its number k, from 1. It returns whether it killed the
	// operator: then the request is not forwarded, or the answer not returned.
	crash func(k int, before bool) bool
	// latency is added to every request.
	latency time.Duration
	// watchDelay delivers each piece of a watch stream this long after it
	// came from the API server (a delay line: the lag does not add up).
	watchDelay time.Duration
	// lagOnly, if set, is the one resource (its plural) whose watch lags.
	lagOnly string
	// cutWatches closes each watch stream after a random time up to this.
	cutWatches time.Duration
	// throttle answers this fraction of requests 429 with Retry-After: 1.
	throttle float64
	// expire ends the watch of each resource once with 410 Gone, forcing a
	// relist.
	expire bool
	// staleFrom serves the first list of each resource at this resourceVersion
	// (an informer's watch-list is refused so that it falls back to a list).
	staleFrom string
}

type proxy struct {
	t        testing.TB
	url      string // http://127.0.0.1:port
	upstream *url.URL
	rp       *httputil.ReverseProxy

	mu        sync.Mutex
	f         faults
	held      chan struct{} // closed when the watch streams may flow; nil when they flow
	blackhole chan struct{} // closed when requests may pass again; nil when they pass
	stale     map[string]bool
	expired   map[string]bool // the resources whose watch has had its 410

	mutations atomic.Int64
	writes    []string         // the kind of each mutating request (verb and resource), since resetWrites
	requests  atomic.Int64     // every request, for the rate during and after a fault
	goneReads atomic.Int64     // reads of one Promocion answered 404 (goneRead)
	injected  map[string]int64 // by kind of fault, what it did to a request or a watch stream: a fault that did happen
	comeBack  time.Time        // when the last 429's Retry-After runs out: the client waits until then
	rnd       *rand.Rand       // its random choices, seeded from the scenario's (under mu)
}

// chance draws a float in [0, 1) from the proxy's source.
func (p *proxy) chance() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rnd.Float64()
}

// within draws a duration in [0, d) from the proxy's source.
func (p *proxy) within(d time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(p.rnd.Int64N(int64(d)))
}

// The kinds of fault, as the proxy counts them.
const (
	faultLatency   = "requests delayed"
	faultThrottle  = "requests answered 429"
	faultExpire    = "watches ended with 410 Gone"
	faultCut       = "watch streams cut"
	faultStale     = "lists served stale"
	faultHeld      = "watch streams held, each with the events behind it"
	faultLag       = "watch events delivered late"
	faultBlackhole = "requests swallowed"
	faultCrash     = "operators killed at a crash point"
)

// inject counts one fault of kind done.
func (p *proxy) inject(kind string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.injected[kind]++
}

// retryAfter is what a 429 from the proxy tells the client to wait.
const retryAfter = time.Second

// over waits until the faults, set off already, have stopped acting: a
// client told by a 429 to come back after Retry-After is still held by the
// fault until then. It returns that moment.
func (p *proxy) over() time.Time {
	p.mu.Lock()
	comeBack := p.comeBack
	p.mu.Unlock()
	time.Sleep(time.Until(comeBack))
	return time.Now()
}

// injectedOf is how many faults of kind the proxy did.
func (p *proxy) injectedOf(kind string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected[kind]
}

// kinds are the kinds of fault that f injects.
func (f faults) kinds() []string {
	var k []string
	for _, c := range []struct {
		on   bool
		kind string
	}{{f.crash != nil, faultCrash}, {f.latency > 0, faultLatency}, {f.watchDelay > 0, faultLag}, {f.cutWatches > 0, faultCut},
		{f.throttle > 0, faultThrottle}, {f.expire, faultExpire}, {f.staleFrom != "", faultStale}} {
		if c.on {
			k = append(k, c.kind)
		}
	}
	return k
}

// mustHaveInjected fails the test for each kind of fault that the proxy has
// not done once, and returns the counts, for the notes.
func (p *proxy) mustHaveInjected(t testing.TB, kinds ...string) string {
	t.Helper()
	var counts []string
	for _, k := range kinds {
		n := p.injectedOf(k)
		if n == 0 {
			t.Errorf("the fault did not happen: 0 %s", k)
		}
		counts = append(counts, fmt.Sprintf("%d %s", n, k))
	}
	return strings.Join(counts, ", ")
}

// startProxy starts a proxy in front of the tests' API server, speaking for
// the ServiceAccount sa of default.
func (l *lesson) startProxy(sa string) *proxy {
	l.T.Helper()
	token := l.Kubectl("create", "token", sa, "-n", "default", "--duration=2h")
	cfg := l.RestConfig(l.Kubeconfig)
	up, err := url.Parse(cfg.Host)
	if err != nil {
		l.T.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cfg.CAData)
	p := &proxy{t: l.T, upstream: up, stale: map[string]bool{}, expired: map[string]bool{}, injected: map[string]int64{},
		rnd: rand.New(rand.NewPCG(l.seeds.Uint64(), l.seeds.Uint64()))}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(up)
			r.Out.Host = up.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: false},
		FlushInterval: -1, // watch events go on at once
		// An upstream gone (an outage) or a stream cut is the point here; the
		// operator's log says what it saw.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		l.T.Fatal(err)
	}
	p.url = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: p}
	go func() { _ = srv.Serve(ln) }()
	l.T.Cleanup(func() { p.release(); _ = srv.Close() })
	return p
}

// set replaces the faults.
func (p *proxy) set(f faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f = f
	p.stale, p.expired = map[string]bool{}, map[string]bool{}
}

// expireOnce says whether the watch of path is yet to get its 410.
func (p *proxy) expireOnce(path string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expired[path] {
		return false
	}
	p.expired[path] = true
	return true
}

func (p *proxy) faults() faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f
}

// hold stops every watch stream where it is; release lets them flow again,
// and lets requests through a blackhole.
func (p *proxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// swallow loses every request until release: none is answered, none arrives.
func (p *proxy) swallow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blackhole == nil {
		p.blackhole = make(chan struct{})
	}
}

func (p *proxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
	if p.blackhole != nil {
		close(p.blackhole)
		p.blackhole = nil
	}
}

func (p *proxy) gates() (held, blackhole chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held, p.blackhole
}

func isWatch(r *http.Request) bool { return r.URL.Query().Get("watch") == "true" }

func isMutation(r *http.Request) bool {
	return r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch || r.Method == http.MethodDelete
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	if f := os.Getenv("E2E_PROXY_TRACE"); f != "" {
		if fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = fmt.Fprintf(fh, "%s %s %s\n", time.Now().Format("15:04:05.000"), r.Method, r.URL.RequestURI())
			_ = fh.Close()
		}
	}
	f := p.faults()
	if _, blackhole := p.gates(); blackhole != nil {
		// Lost, as a packet is in a blackhole: the client hears nothing, and
		// gives up; when the blackhole ends, the request does not arrive late.
		p.inject(faultBlackhole)
		select {
		case <-blackhole:
		case <-r.Context().Done():
		}
		panic(http.ErrAbortHandler)
	}
	if f.latency > 0 {
		p.inject(faultLatency)
		time.Sleep(f.latency)
	}
	if f.throttle > 0 && p.chance() < f.throttle {
		p.inject(faultThrottle)
		p.mu.Lock()
		p.comeBack = time.Now().Add(retryAfter)
		p.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`, http.StatusTooManyRequests)
		return
	}
	if f.staleFrom != "" && r.Method == http.MethodGet && !isStaleDone(p, r) {
		if isWatch(r) && r.URL.Query().Get("sendInitialEvents") == "true" {
			// Refused: the informer falls back to a list, served below.
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}`, http.StatusInternalServerError)
			return
		}
		if !isWatch(r) {
			q := r.URL.Query()
			q.Set("resourceVersion", f.staleFrom)
			q.Set("resourceVersionMatch", "Exact")
			q.Del("limit")
			q.Del("continue")
			r.URL.RawQuery = q.Encode()
			p.markStale(r)
		}
	}
	if r.Method == http.MethodGet && !isWatch(r) && promocionPath.MatchString(r.URL.Path) {
		w = &goneRead{ResponseWriter: w, p: p}
	}
	if isWatch(r) {
		sw := &slowWriter{ResponseWriter: w, p: p, path: r.URL.Path, line: newDelayLine(w), ctx: r.Context()}
		defer sw.line.drain()
		w = sw
	}
	if isMutation(r) {
		k := int(p.mutations.Add(1))
		p.mu.Lock()
		p.writes = append(p.writes, writeKind(r))
		p.mu.Unlock()
		if f.crash != nil {
			if f.crash(k, true) {
				p.inject(faultCrash)
				return // the operator is dead; its request goes nowhere
			}
			w = &afterAnswer{ResponseWriter: w, crash: func() bool {
				killed := f.crash(k, false)
				if killed {
					p.inject(faultCrash)
				}
				return killed
			}}
		}
	}
	p.rp.ServeHTTP(w, r)
}

// resetWrites starts counting the operator's mutating requests from 0.
func (p *proxy) resetWrites() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mutations.Store(0)
	p.writes = nil
}

// writeKinds are the kinds of the mutating requests since resetWrites, in order.
func (p *proxy) writeKinds() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.writes)
}

// writeKind names a mutating request by its verb and resource: "PUT promociones/status".
func writeKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	for i, part := range parts {
		if part == "namespaces" && i+2 < len(parts) {
			parts = parts[i+2:]
			break
		}
	}
	resource := parts[0]
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	return r.Method + " " + resource
}

func isStaleDone(p *proxy, r *http.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stale[r.URL.Path]
}

func (p *proxy) markStale(r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stale[r.URL.Path] = true
	p.injected[faultStale]++
}

// promocionPath is the path of one Promocion: the operator reads it past its
// cache (stillLive) before a write that would be wrong for one gone.
var promocionPath = regexp.MustCompile(`/promociones/[^/]+$`)

// goneRead counts the reads of a Promocion that the API server answers 404:
// the operator, past its cache, found a Promocion gone that its cache held.
type goneRead struct {
	http.ResponseWriter
	p *proxy
}

func (g *goneRead) WriteHeader(code int) {
	if code == http.StatusNotFound {
		g.p.goneReads.Add(1)
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *goneRead) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// slowWriter delays, holds, cuts or expires a watch stream, by the faults of
// the moment: a watch opened before a fault is set gets it too.
type slowWriter struct {
	http.ResponseWriter
	p    *proxy
	path string
	line *delayLine
	cut  time.Time // when the stream drops; zero: not decided
	ctx  context.Context
}

// expired is the watch event of a resourceVersion that etcd compacted away.
const expired = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}}` + "\n"

func (s *slowWriter) Write(b []byte) (int, error) {
	if held, _ := s.p.gates(); held != nil {
		s.p.inject(faultHeld)
		select {
		case <-held:
		case <-s.ctx.Done():
			return 0, s.ctx.Err()
		}
	}
	f := s.p.faults()
	switch {
	case f.expire && s.p.expireOnce(s.path):
		s.p.inject(faultExpire)
		s.line.push([]byte(expired), s.delay(f))
		panic(http.ErrAbortHandler) // after the deferred drain has sent the event
	case f.cutWatches <= 0:
		s.cut = time.Time{}
	case s.cut.IsZero():
		s.cut = time.Now().Add(s.p.within(f.cutWatches))
	case time.Now().After(s.cut):
		s.p.inject(faultCut)
		panic(http.ErrAbortHandler) // the connection drops, as a network would drop it
	}
	delay := s.delay(f)
	if delay > 0 && len(b) > 0 {
		s.p.inject(faultLag)
	}
	return s.line.push(b, delay), nil
}

// Flush goes down the line too, behind what was written before it.
func (s *slowWriter) Flush() { s.line.push(nil, s.delay(s.p.faults())) }

// delay is how late f delivers this stream's pieces.
func (s *slowWriter) delay(f faults) time.Duration {
	if f.lagOnly != "" && !strings.HasSuffix(s.path, "/"+f.lagOnly) {
		return 0
	}
	return f.watchDelay
}

// delayLine writes each piece it is given, and flushes it, when its delay is
// over; one goroutine writes, so the ResponseWriter is never shared, and the
// delay of each piece runs from its arrival: the lag does not add up.
type delayLine struct {
	pieces chan piece
	done   chan struct{}
}

type piece struct {
	b  []byte
	at time.Time
}

func newDelayLine(w http.ResponseWriter) *delayLine {
	d := &delayLine{pieces: make(chan piece, 4096), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for p := range d.pieces {
			time.Sleep(time.Until(p.at))
			if _, err := w.Write(p.b); err != nil {
				continue // the client went away; the rest is dropped with it
			}
			if f, ok := w.(http.Flusher); ok { // after every piece: a watch event goes on at once
				f.Flush()
			}
		}
	}()
	return d
}

func (d *delayLine) push(b []byte, delay time.Duration) int {
	d.pieces <- piece{b: bytes.Clone(b), at: time.Now().Add(delay)}
	return len(b)
}

// drain waits until every piece is written: the ResponseWriter must not be
// used once the handler returns.
func (d *delayLine) drain() {
	close(d.pieces)
	<-d.done
}

// afterAnswer calls crash when the API server's answer arrives, before any of
// it goes back; if that killed the operator, nothing goes back.
type afterAnswer struct {
	http.ResponseWriter
	crash  func() bool
	killed bool
}

func (a *afterAnswer) WriteHeader(code int) {
	if a.killed = a.crash(); !a.killed {
		a.ResponseWriter.WriteHeader(code)
	}
}

func (a *afterAnswer) Write(b []byte) (int, error) {
	if a.killed {
		return 0, http.ErrAbortHandler
	}
	return a.ResponseWriter.Write(b)
}

func (a *afterAnswer) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// kubeconfig writes a kubeconfig that reaches the API server through the proxy.
func (p *proxy) kubeconfig(l *lesson) string {
	l.T.Helper()
	path := filepath.Join(l.Tmp, "proxy-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q}}]
users: [{name: proxy, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy, namespace: default}}]
current-context: proxy
`, p.url)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		l.T.Fatal(err)
	}
	return path
}
