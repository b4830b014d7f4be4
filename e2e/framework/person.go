package framework

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
func (l *Lesson) PersonKubeconfig(name, group string) string {
	l.T.Helper()
	pki := filepath.Join(Env.ClusterDir, "pki")
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		l.T.Fatal(err)
	}
	cas, err := cert.ParseCertsPEM(caPEM)
	if err != nil {
		l.T.Fatal(err)
	}
	caKey, err := keyutil.PrivateKeyFromFile(filepath.Join(pki, "ca.key"))
	if err != nil {
		l.T.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		l.T.Fatal(err)
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
		l.T.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		l.T.Fatal(err)
	}
	b64 := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return l.writeKubeconfig(name, fmt.Sprintf("{client-certificate-data: %q, client-key-data: %q}", b64("CERTIFICATE", der), b64("EC PRIVATE KEY", keyDER)))
}
