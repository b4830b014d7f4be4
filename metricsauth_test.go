package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"
)

// reviewCounter counts the reviews that reach the API server.
type reviewCounter struct {
	next    http.RoundTripper
	reviews atomic.Int32
}

func (c *reviewCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/tokenreviews") || strings.HasSuffix(req.URL.Path, "/subjectaccessreviews") {
		c.reviews.Add(1)
	}
	return c.next.RoundTrip(req)
}

func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)

	// The ClusterRole that manifiestos/metrics.yaml ships, bound to one of two
	// ServiceAccounts.
	b, err := os.ReadFile(filepath.Join("manifiestos", "metrics.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(strings.Split(string(b), "\n---\n")[0]), &role); err != nil || role.Kind != "ClusterRole" {
		t.Fatalf("metrics.yaml's first object is not the ClusterRole (%v): %s", err, role.Kind)
	}
	role.Name = ns + "-metrics-reader"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-lector"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "lector", Namespace: ns}},
	}
	for _, obj := range []client.Object{&role, binding, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "lector", Namespace: ns}}, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "curioso", Namespace: ns}}} {
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = k8sClient.Delete(ctx, &role)
		_ = k8sClient.Delete(ctx, binding)
	})
	token := func(sa string) string {
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}

	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	counter := &reviewCounter{next: httpClient.Transport}
	httpClient.Transport = counter
	g, err := newGate(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	g.now = func() time.Time { return now }
	handler, err := g.filter(testr.New(t), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "las métricas") }))
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(token string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}

	lector := token("lector")
	for _, tc := range []struct {
		who, token string
		want       int
		reviews    int32
	}{
		{"no token", "", http.StatusUnauthorized, 0},
		{"a made-up token", "no-es-un-token", http.StatusUnauthorized, 1},
		{"curioso, not bound to the role", token("curioso"), http.StatusForbidden, 2},
		{"lector, bound to the role", lector, http.StatusOK, 2},
		{"lector again: the answer is remembered", lector, http.StatusOK, 0},
		{"the made-up token again: remembered too", "no-es-un-token", http.StatusUnauthorized, 0},
	} {
		before := counter.reviews.Load()
		code, body := scrape(tc.token)
		if code != tc.want || (code == http.StatusOK) != (body == "las métricas") {
			t.Errorf("%s: %d %q, want %d", tc.who, code, body, tc.want)
		}
		if sent := counter.reviews.Load() - before; sent != tc.reviews {
			t.Errorf("%s: %d reviews sent, want %d", tc.who, sent, tc.reviews)
		}
	}

	// A revoked binding shuts lector out once its answer has expired.
	if err := k8sClient.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	if code, _ := scrape(lector); code != http.StatusOK {
		t.Errorf("lector within a minute of its answer: %d, want the remembered 200", code)
	}
	now = now.Add(allowedFor)
	eventually(t, "the revoked binding refuses lector", func() error {
		if code, _ := scrape(lector); code != http.StatusForbidden {
			now = now.Add(refusedFor) // an answer given while RBAC's cache lagged
			return fmt.Errorf("%d", code)
		}
		return nil
	})

	// No API server to ask: 500, and the metrics stay behind the gate.
	down, err := newGate(&rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+lector)
	if code, _, err := down.decide(req); code != http.StatusInternalServerError || err == nil {
		t.Errorf("with no API server: %d, %v; want 500 and the error", code, err)
	}
}

func TestGateForgetsExpiredAnswersFirst(t *testing.T) {
	now := time.Now()
	g := &gate{now: func() time.Time { return now }, answers: map[answerKey]answer{}}
	key := func(i int) answerKey {
		return answerKey{token: [32]byte{byte(i), byte(i >> 8)}, verb: "get", path: "/metrics"}
	}
	for i := range maxRemembered {
		expires := now.Add(time.Minute)
		if i%2 == 0 {
			expires = now // expired: "now" is not before it
		}
		g.remember(key(i), answer{code: http.StatusOK, expires: expires})
	}
	if len(g.answers) != maxRemembered {
		t.Fatalf("%d answers remembered, want %d", len(g.answers), maxRemembered)
	}
	g.remember(key(maxRemembered), answer{code: http.StatusOK, expires: now.Add(time.Minute)})
	if len(g.answers) != maxRemembered/2+1 {
		t.Errorf("full, with half expired: %d answers kept, want the %d live ones and the new one", len(g.answers), maxRemembered/2)
	}
	for i := maxRemembered + 1; len(g.answers) < maxRemembered; i++ {
		g.remember(key(i), answer{code: http.StatusOK, expires: now.Add(time.Minute)})
	}
	g.remember(key(2*maxRemembered), answer{code: http.StatusOK, expires: now.Add(time.Minute)})
	if len(g.answers) != 1 {
		t.Errorf("full, none expired: %d answers kept, want only the new one", len(g.answers))
	}
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"":                   "",
		"Bearer abc":         "abc",
		"bearer abc":         "abc",
		"  Bearer abc  ":     "abc",
		"Bearer abc extra":   "abc",
		"Bearer  abc":        "", // as kube-apiserver: the token is the second field
		"Basic dXNlcjpwdw==": "",
		"Bearer":             "",
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", header)
		if got, ok := bearerToken(req); got != want || ok != (want != "") {
			t.Errorf("Authorization %q: %q %v, want %q", header, got, ok, want)
		}
	}
}

// --pprof serves Go's profiles on the metrics endpoint, behind the same gate:
// the real server of metricsOptions, over HTTPS. A token bound to
// manifiestos/metrics.yaml's pprof-reader gets the heap profile and not the
// metrics; one bound to metrics-reader gets the metrics and not the profile;
// without --pprof, the path is not served at all.
func TestProfilesNeedTheirOwnRole(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	roles := metricsClusterRoles(t)
	token := map[string]string{}
	for sa, roleName := range map[string]string{"lector": "operador-promociones-metrics-reader", "perfilador": "operador-promociones-pprof-reader"} {
		role, ok := roles[roleName]
		if !ok {
			t.Fatalf("manifiestos/metrics.yaml has no ClusterRole %s", roleName)
		}
		role.Name = ns + "-" + roleName
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
		}
		for _, obj := range []client.Object{&role, binding, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}} {
			if err := k8sClient.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			_ = k8sClient.Delete(ctx, &role)
			_ = k8sClient.Delete(ctx, binding)
		})
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		token[sa] = tr.Status.Token
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the server's self-signed certificate
	for _, pprofOn := range []bool{true, false} {
		var f flags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f.bind(fs)
		if err := fs.Parse([]string{"--metrics-bind-address=127.0.0.1:0", "--metrics-cert-dir=", fmt.Sprintf("--pprof=%t", pprofOn)}); err != nil {
			t.Fatal(err)
		}
		if err := f.validate(); err != nil {
			t.Fatal(err)
		}
		srv, err := metricsserver.NewServer(f.metricsOptions(), cfg, httpClient)
		if err != nil {
			t.Fatal(err)
		}
		srvCtx, stop := context.WithCancel(ctx)
		go func() { _ = srv.Start(srvCtx) }()
		var addr string
		eventually(t, "the metrics server listens", func() error {
			if addr = srv.(interface{ GetBindAddr() string }).GetBindAddr(); addr == "" {
				return errors.New("not yet")
			}
			return nil
		})
		get := func(who, path string) int {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
			req.Header.Set("Authorization", "Bearer "+token[who])
			resp, err := https.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode == http.StatusOK && path == "/debug/pprof/heap" && !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
				t.Errorf("%s: the heap profile is not a gzipped protobuf: %.40q", who, body)
			}
			return resp.StatusCode
		}
		for _, tc := range []struct {
			who, path string
			want      int
		}{
			{"perfilador", "/debug/pprof/heap", http.StatusOK},
			{"lector", "/debug/pprof/heap", http.StatusForbidden},
			{"lector", "/metrics", http.StatusOK},
			{"perfilador", "/metrics", http.StatusForbidden},
		} {
			want := tc.want
			if !pprofOn && strings.HasPrefix(tc.path, "/debug/pprof/") {
				want = http.StatusNotFound
			}
			if got := get(tc.who, tc.path); got != want {
				t.Errorf("--pprof=%t: %s gets %s: %d, want %d", pprofOn, tc.who, tc.path, got, want)
			}
		}
		stop()
	}
}

// metricsClusterRoles are the ClusterRoles that manifiestos/metrics.yaml ships, by name.
func metricsClusterRoles(t *testing.T) map[string]rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("manifiestos", "metrics.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]rbacv1.ClusterRole{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err == nil && role.Kind == "ClusterRole" {
			roles[role.Name] = role
		}
	}
	return roles
}
