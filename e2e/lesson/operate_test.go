package lesson

// What a team needs to operate the operator: metrics that only an authorized
// scraper reads, roles for a namespace's users, and a one-file install.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// /metrics over HTTPS, as deploy.yaml serves it: 401 without a token, no
// metrics for a made-up one, 403 for a ServiceAccount not bound to the metrics-reader ClusterRole, 200 for one
// that is; HTTP/1.1 only; and a certificate given by --metrics-cert-dir.
func TestSecureMetrics(t *testing.T) {
	l := newLesson(t)
	ns := l.Namespace("metricas")
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "metrics.yaml"))
	for _, sa := range []string{"lector", "curioso"} {
		l.Kubectl("create", "serviceaccount", sa, "-n", ns)
	}
	l.Kubectl("create", "clusterrolebinding", "metricas-lector", "--clusterrole=operador-promociones-metrics-reader", "--serviceaccount="+ns+":lector")
	t.Cleanup(func() {
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "clusterrolebinding/metricas-lector")
		_, _ = l.TryKubectl("delete", "--ignore-not-found", "-f", filepath.Join(l.Root, "manifiestos", "metrics.yaml"))
	})
	token := func(sa string) string { return l.Kubectl("create", "token", sa, "-n", ns) }

	// The default: a self-signed certificate, which a scraper in the cluster is
	// told to trust (insecureSkipVerify in the ServiceMonitor) or replaces.
	o := l.Start(framework.Launch{Who: "metricas", SecureMetrics: true, Args: []string{"--namespace=" + ns, "--leader-elect", "--leader-election-namespace=" + ns}})
	insecure := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}} //nolint:gosec // the certificate is self-signed
	scrape := func(tlsConfig *tls.Config, token string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, o.MetricsURL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error(), ""
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Proto
	}
	l.Eventually("the metrics endpoint answers over HTTPS", func() error {
		if code, body, _ := scrape(insecure, ""); code == 0 {
			return fmt.Errorf("%s", body)
		}
		return nil
	})
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a made-up token", "no-es-un-token", http.StatusUnauthorized},
		{"the ServiceAccount curioso, not bound to metrics-reader", token("curioso"), http.StatusForbidden},
		{"the ServiceAccount lector, bound to metrics-reader", token("lector"), http.StatusOK},
	} {
		code, body, proto := scrape(insecure, tc.token)
		if code != tc.want {
			t.Errorf("GET /metrics with %s: %d, want %d: %.200s", tc.who, code, tc.want, body)
		}
		if proto != "HTTP/1.1" {
			t.Errorf("GET /metrics with %s spoke %s: HTTP/2 must stay off", tc.who, proto)
		}
		if tc.want != http.StatusOK && strings.Contains(body, "controller_runtime") {
			t.Errorf("GET /metrics with %s answered metrics", tc.who)
		}
		if tc.want == http.StatusOK {
			// The controller's metrics appear once it leads and has started,
			// and the queue's depth once something was queued.
			l.CreatePromociones(ns, 1, 1)
			l.Eventually("an authorized scrape holds every metric the alerts select", func() error {
				_, body, _ = scrape(insecure, tc.token)
				for _, name := range append(alertMetrics(t, l.Root), `controller_runtime_reconcile_total{controller="promocion"`) {
					if !strings.Contains(body, name) {
						return fmt.Errorf("no %s", name)
					}
				}
				return nil
			})
		}
		l.Logf("GET /metrics with %s: %d over %s", tc.who, code, proto)
	}
	o.Stop(t)

	// A certificate of one's own (cert-manager's Secret, mounted): the
	// endpoint serves it, and a client that trusts only its CA gets in.
	dir, ca := l.certificate("127.0.0.1")
	o = l.Start(framework.Launch{Who: "metricas-cert", SecureMetrics: true, Args: []string{"--namespace=" + ns, "--metrics-cert-dir=" + dir}})
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	l.Eventually("the metrics endpoint serves the given certificate, to a client that trusts only its CA", func() error {
		if code, body, _ := scrape(&tls.Config{RootCAs: pool}, token("lector")); code != http.StatusOK {
			return fmt.Errorf("%d %.200s", code, body)
		}
		return nil
	})
	o.Stop(t)
}

// alertMetrics are the metrics that manifiestos/monitoring's alerts select,
// but for up, which Prometheus makes itself.
func alertMetrics(t *testing.T, root string) []string {
	rules, err := os.ReadFile(filepath.Join(root, "manifiestos", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`([a-z_][a-z0-9_]*)\{`).FindAllStringSubmatch(string(rules), -1) {
		if m[1] != "up" && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	if len(names) < 4 {
		t.Fatalf("only %v in the alerts' expressions", names)
	}
	return names
}

// certificate writes tls.crt and tls.key for host, signed by a new CA, into a
// new directory, and returns it with the CA.
func (l *lesson) certificate(host string) (string, *x509.Certificate) {
	l.T.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			l.T.Fatal(err)
		}
		return k
	}
	caKey, serverKey := key(), key()
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tienda-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		l.T.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	serverDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		IPAddresses: []net.IP{net.ParseIP(host)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}, ca, &serverKey.PublicKey, caKey)
	if err != nil {
		l.T.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(serverKey)
	if err != nil {
		l.T.Fatal(err)
	}
	dir := filepath.Join(l.Tmp, "metrics-certs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		l.T.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: serverDER}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			l.T.Fatal(err)
		}
	}
	return dir, ca
}

// A namespace's users work with Promociones through the built-in roles:
// roles.yaml aggregates promocion-editor into edit and admin, and
// promocion-viewer into view.
func TestUserRoles(t *testing.T) {
	l := newLesson(t)
	ns := l.Namespace("roles")
	roles := filepath.Join(l.Root, "manifiestos", "roles.yaml")
	l.Kubectl("apply", "-f", roles)
	t.Cleanup(func() { _, _ = l.TryKubectl("delete", "--ignore-not-found", "-f", roles) })
	for user, role := range map[string]string{"ana": "edit", "carla": "admin", "bruno": "view"} {
		l.Kubectl("create", "rolebinding", user, "--clusterrole="+role, "--user="+user, "-n", ns)
	}
	// kube-controller-manager's clusterrole-aggregation controller adds the rules.
	l.Eventually("the built-in roles hold the Promociones' rules", func() error {
		for _, user := range []string{"ana", "carla", "bruno"} {
			if l.CanI(user, "get", "promociones.tienda.example.com", "-n", ns) != "yes" {
				return fmt.Errorf("%s may not get promociones yet", user)
			}
		}
		return nil
	})
	yes := map[bool]string{true: "yes", false: "no"}
	for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
		reads := verb == "get" || verb == "list" || verb == "watch"
		for _, user := range []string{"ana", "carla", "bruno"} {
			editor := user != "bruno"
			l.ExpectCanI(user, yes[editor || reads], verb, "promociones.tienda.example.com", "-n", ns)
			l.ExpectCanI(user, yes[verb == "get" || editor && (verb == "update" || verb == "patch")], verb, "promociones.tienda.example.com", "--subresource=scale", "-n", ns)
			l.ExpectCanI(user, yes[verb == "get"], verb, "promociones.tienda.example.com", "--subresource=status", "-n", ns) // only the operator writes the status
			l.ExpectCanI(user, "no", verb, "promociones.tienda.example.com", "-n", "default")                                // their namespace only
		}
	}
	l.Logf("kubectl auth can-i: edit and admin may change Promociones and scale them, view may read them; none may write the status, none outside the namespace")
}

// make build-installer writes one file with everything, the image set by
// kustomize from IMG; the API server accepts it (a server-side dry run).
func TestInstaller(t *testing.T) {
	l := newLesson(t)
	const img = "registry.example.com:5000/tienda/operador-promociones:v2.0.0"
	out := filepath.Join(l.Tmp, "install.yaml")
	cmd := exec.Command("make", "build-installer", "IMG="+img, "INSTALLER="+out, "KUBECTL="+l.KubectlBin)
	cmd.Dir = l.Root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, b)
	}
	// --force-conflicts: objects that earlier tests applied client-side are
	// here; what is checked is that the API server accepts these. A dry run
	// makes no namespace, so the operator's is made first, as the file's first
	// object would be.
	l.systemNamespace()
	applied := l.Kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", out, "-o", "json")
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string            `json:"name"`
				Namespace string            `json:"namespace"`
				Labels    map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Ports []struct {
					Name string `json:"name"`
				} `json:"ports"`
				Template struct {
					Spec struct {
						Containers []struct {
							Image string `json:"image"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(applied), &list); err != nil {
		t.Fatalf("the dry run's output: %v\n%.500s", err, applied)
	}
	var kinds []string
	var metricsPort, metricsApp string
	for _, item := range list.Items {
		kinds = append(kinds, item.Kind+"/"+item.Metadata.Name)
		if ns := item.Metadata.Namespace; ns != "" && ns != framework.SystemNamespace {
			t.Errorf("install.yaml puts %s/%s in %s, want the operator's own namespace %s", item.Kind, item.Metadata.Name, ns, framework.SystemNamespace)
		}
		if item.Kind == "Service" && item.Metadata.Name == "operador-promociones-metrics" && len(item.Spec.Ports) > 0 {
			metricsPort, metricsApp = item.Spec.Ports[0].Name, item.Metadata.Labels["app"]
		}
		if item.Kind == "Deployment" {
			if got := item.Spec.Template.Spec.Containers[0].Image; got != img {
				t.Errorf("the Deployment's image is %q, want %q", got, img)
			}
		}
	}
	for _, want := range []string{"Namespace/" + framework.SystemNamespace, "CustomResourceDefinition/promociones.tienda.example.com", "ServiceAccount/operador-promociones", "ClusterRole/operador-promociones",
		"ClusterRoleBinding/operador-promociones", "Role/operador-promociones-leader-election", "ClusterRole/operador-promociones-metrics-reader", "ClusterRole/operador-promociones-pprof-reader",
		"ClusterRole/operador-promociones-metrics-auth", "ClusterRoleBinding/operador-promociones-metrics-auth",
		"ClusterRole/promocion-editor", "ClusterRole/promocion-viewer", "Service/operador-promociones-metrics", "Deployment/operador-promociones",
		"PodDisruptionBudget/operador-promociones", "ValidatingAdmissionPolicy/operador-promociones-protect-crd",
		"ValidatingAdmissionPolicyBinding/operador-promociones-protect-crd"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("install.yaml lacks %s; it holds %v", want, kinds)
		}
	}
	l.Logf("make build-installer IMG=%s: %d objects, accepted by the API server (server-side dry run), the image set", img, len(list.Items))

	// The installer's parts: the API (make install, make uninstall) and the
	// operator (make undeploy), with the operator's namespace, are together
	// all of manifiestos/, each object in one part only, as kubectl apply -k
	// sees the folder (kubectl apply -f, the lesson's, leaves the namespace out).
	objects := func(yaml string) []string {
		var names []string
		for _, doc := range strings.Split(yaml, "\n---\n") {
			kind := regexp.MustCompile(`(?m)^kind: (\S+)$`).FindStringSubmatch(doc)
			name := regexp.MustCompile(`(?m)^  name: (\S+)$`).FindStringSubmatch(doc)
			if kind != nil && name != nil {
				names = append(names, kind[1]+"/"+name[1])
			}
		}
		slices.Sort(names)
		return names
	}
	part := func(env ...string) []string {
		cmd := exec.Command(filepath.Join(l.Root, "hack", "installer.sh"), img, "-", l.KubectlBin)
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/installer.sh with %v: %v", env, err)
		}
		return objects(string(b))
	}
	api, operator := part("PART=api"), part("PART=operator")
	var files []string
	yamls, _ := filepath.Glob(filepath.Join(l.Root, "manifiestos", "*.yaml"))
	inFolders, _ := filepath.Glob(filepath.Join(l.Root, "manifiestos", "sistema", "*.yaml"))
	for _, f := range append(yamls, inFolders...) {
		b, _ := os.ReadFile(f)
		files = append(files, objects(string(b))...)
	}
	slices.Sort(files)
	both := slices.Sorted(slices.Values(append(append(slices.Clone(api), operator...), "Namespace/"+framework.SystemNamespace)))
	kustomized := objects(l.Kubectl("kustomize", filepath.Join(l.Root, "manifiestos")))
	switch {
	case !slices.Equal(both, files):
		t.Errorf("the installer's parts, api %v and operator %v, are not manifiestos/*.yaml %v", api, operator, files)
	case !slices.Equal(kustomized, files):
		t.Errorf("manifiestos/Kustomization holds %v, manifiestos/*.yaml %v", kustomized, files)
	case !slices.Equal(part(), files):
		t.Errorf("make build-installer holds %v, manifiestos/*.yaml %v", part(), files)
	case !slices.Contains(api, "CustomResourceDefinition/promociones.tienda.example.com") || slices.Contains(operator, "CustomResourceDefinition/promociones.tienda.example.com"):
		t.Errorf("the CRD is not in the API's part alone: api %v, operator %v", api, operator)
	}
	l.Logf("the installer's parts: the API (%d objects) and the operator (%d), together manifiestos/", len(api), len(operator))

	// Confined to namespaces: the operator's ClusterRole bound in each by a
	// RoleBinding, none cluster-wide, and the operator told to watch only them.
	confined := filepath.Join(l.Tmp, "confined.yaml")
	cmd = exec.Command("make", "build-installer", "IMG="+img, "INSTALLER="+confined, "KUBECTL="+l.KubectlBin, "NAMESPACES=tienda,outlet", "WEB_IMAGE=registry.example.com/web:2")
	cmd.Dir = l.Root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer NAMESPACES=...: %v\n%s", err, b)
	}
	b, _ := os.ReadFile(confined)
	got := objects(string(b))
	want := slices.DeleteFunc(slices.Clone(files), func(o string) bool { return o == "ClusterRoleBinding/operador-promociones" })
	want = slices.Sorted(slices.Values(append(want, "RoleBinding/operador-promociones", "RoleBinding/operador-promociones")))
	if !slices.Equal(got, want) {
		t.Errorf("confined, install.yaml holds %v, want %v", got, want)
	}
	for _, s := range []string{"namespace: tienda\n", "namespace: outlet\n", "- --namespace=tienda\n", "- --namespace=outlet\n", "- --web-image=registry.example.com/web:2\n"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("confined, install.yaml lacks %q", strings.TrimSpace(s))
		}
	}
	for _, bad := range []string{"NAMESPACES=Tienda", "NAMESPACES=a,,b", "WEB_IMAGE=web image"} {
		cmd := exec.Command("make", "build-installer", "IMG="+img, "INSTALLER="+confined, "KUBECTL="+l.KubectlBin, bad)
		cmd.Dir = l.Root
		if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "is not a") {
			t.Errorf("make build-installer %s: %v, want a refusal:\n%s", bad, err, b)
		}
	}
	l.Logf("make build-installer NAMESPACES=tienda,outlet: RoleBindings in both, no ClusterRoleBinding, --namespace for each; bad values refused")

	// manifiestos/monitoring, which needs the Prometheus Operator's CRDs that
	// this cluster lacks: the NetworkPolicy goes to the API server, and the
	// ServiceMonitor must name the metrics Service's port and labels.
	monitoring := filepath.Join(l.Root, "manifiestos", "monitoring")
	l.Kubectl("apply", "--dry-run=server", "-f", filepath.Join(monitoring, "networkpolicy.yaml"))
	sm, err := os.ReadFile(filepath.Join(monitoring, "servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if metricsPort == "" || !strings.Contains(string(sm), "- port: "+metricsPort+"\n") || !strings.Contains(string(sm), "app: "+metricsApp+"\n") {
		t.Errorf("servicemonitor.yaml does not select the metrics Service's port %q and label app=%q:\n%s", metricsPort, metricsApp, sm)
	}
}
