package framework

// Identities: kubeconfigs of a ServiceAccount (a token), of a person (a
// client certificate of the cluster's CA), and the operator's RBAC given to
// a ServiceAccount of a test's.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// PersonKubeconfig writes a kubeconfig for a person: user name in group,
// known to the API server by a client certificate that the cluster's CA
// signs (hack/cluster.sh's pki), as a company's login would make one. To API
// Priority and Fairness a person is in global-default, where a ServiceAccount
// is in workload-low with the controllers.
func (h *Harness) PersonKubeconfig(name, group string) string {
	h.T.Helper()
	pki := filepath.Join(h.ClusterDir, "pki")
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		h.T.Fatal(err)
	}
	cas, err := cert.ParseCertsPEM(caPEM)
	if err != nil {
		h.T.Fatal(err)
	}
	caKey, err := keyutil.PrivateKeyFromFile(filepath.Join(pki, "ca.key"))
	if err != nil {
		h.T.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		h.T.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name, Organization: []string{group}},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(3 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, cas[0], key.Public(), caKey.(crypto.Signer))
	if err != nil {
		h.T.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		h.T.Fatal(err)
	}
	b64 := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return h.writeKubeconfig(name, fmt.Sprintf("{client-certificate-data: %q, client-key-data: %q}", b64("CERTIFICATE", der), b64("EC PRIVATE KEY", keyDER)))
}

// ServiceAccountKubeconfig writes a kubeconfig holding a token for the
// ServiceAccount sa of default, as a Pod running as sa would have.
func (h *Harness) ServiceAccountKubeconfig(sa string) string {
	h.T.Helper()
	return h.ServiceAccountKubeconfigIn("default", sa)
}

// ServiceAccountKubeconfigIn is ServiceAccountKubeconfig for the ServiceAccount sa of ns.
func (h *Harness) ServiceAccountKubeconfigIn(ns, sa string) string {
	h.T.Helper()
	token := h.Kubectl("create", "token", sa, "-n", ns, "--duration=3h")
	return h.writeKubeconfig(ns+"-"+sa, fmt.Sprintf("{token: %q}", token))
}

// writeKubeconfig writes name.kubeconfig for the cluster that kubectl talks
// to, with user (the kubeconfig's user block, inline) as its one user.
func (h *Harness) writeKubeconfig(name, user string) string {
	h.T.Helper()
	server := h.Kubectl("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.server}")
	ca := h.Kubectl("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	path := filepath.Join(h.Tmp, name+".kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: %s, user: %s}]
contexts: [{name: local, context: {cluster: local, user: %s, namespace: default}}]
current-context: local
`, server, ca, name, user, name)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		h.T.Fatal(err)
	}
	return path
}

// Identity makes a ServiceAccount of default with the operator's RBAC from
// manifiestos/rbac.yaml (the ClusterRole, and the Lease's Role in default), so
// that the API server sees the operator as a production install would: not
// system:masters, and subject to API Priority and Fairness.
// Everything goes away when the test ends: the lesson starts without RBAC.
func (h *Harness) Identity(name string) {
	h.T.Helper()
	rbac := filepath.Join(h.Root, "manifiestos", "rbac.yaml")
	h.Kubectl("apply", "-f", rbac)
	h.Kubectl("create", "serviceaccount", name, "-n", "default")
	h.Kubectl("create", "clusterrolebinding", "caos-"+name, "--clusterrole=operador-promociones", "--serviceaccount=default:"+name)
	h.Kubectl("create", "rolebinding", "caos-"+name, "-n", "default", "--role=operador-promociones-leader-election", "--serviceaccount=default:"+name)
	h.T.Cleanup(func() {
		_, _ = h.TryKubectl("delete", "--ignore-not-found", "serviceaccount/"+name, "rolebinding/caos-"+name, "-n", "default")
		_, _ = h.TryKubectl("delete", "--ignore-not-found", "clusterrolebinding/caos-"+name)
		_, _ = h.TryKubectl("delete", "--ignore-not-found", "-f", rbac)
	})
}

// LeaseAcquired is when the operator's Lease in default was last taken.
func (h *Harness) LeaseAcquired() time.Time {
	out := h.Kubectl("get", "lease", "operador-promociones", "-n", "default", "-o", "jsonpath={.spec.acquireTime}")
	t, err := time.Parse(time.RFC3339Nano, out)
	if err != nil {
		h.T.Fatalf("the Lease's acquireTime %q: %v", out, err)
	}
	return t
}
