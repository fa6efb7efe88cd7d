package splitdns

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
)

// testCertificate writes a self-signed certificate for name and ip (it is its
// own CA) and its key into dir, and returns their paths.
func testCertificate(t *testing.T, dir, name, ip string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{name},
		IPAddresses:           []net.IP{net.ParseIP(ip)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

func TestDNSOverTLSUpstream(t *testing.T) {
	tlsIP := harness.NewIP(t)
	dir := t.TempDir()
	cert, key := testCertificate(t, dir, "dns.acme.internal", tlsIP)
	// The upstream: stock coredns serving DNS over TLS only.
	harness.StartCoreDNS(t, fmt.Sprintf(`tls://vault.acme.internal:853 {
    bind %s
    tls %s %s
    template IN A {
        answer "{{ .Name }} 60 IN A 10.0.3.1"
    }
}`, tlsIP, cert, key), harness.WithoutWait())
	testkit.Eventually(t, 10*time.Second, "the TLS upstream listening", func() (bool, string) {
		c, err := net.DialTimeout("tcp", tlsIP+":853", 200*time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})

	good, _ := startSplitDNS(t, fmt.Sprintf(`        route vault.acme.internal tls://%s
        tls %s
        tls_servername dns.acme.internal`, tlsIP, cert))
	if got := answerA(t, good.Addr, "secret.vault.acme.internal."); got != "10.0.3.1" {
		t.Errorf("over DNS over TLS: %s, want 10.0.3.1", got)
	}

	// The certificate is checked: another server name is not trusted.
	bad, _ := startSplitDNS(t, fmt.Sprintf(`        route vault.acme.internal tls://%s
        tls %s
        tls_servername other.example`, tlsIP, cert))
	if got := answerA(t, bad.Addr, "secret.vault.acme.internal."); got != "SERVFAIL" {
		t.Errorf("with a server name the certificate does not carry: %s, want SERVFAIL", got)
	}

	// A route's own tls_servername wins over the block's, for that route only.
	perRoute, _ := startSplitDNS(t, fmt.Sprintf(`        route vault.acme.internal tls://%s {
            tls_servername dns.acme.internal
        }
        route other.acme.internal tls://%s
        tls %s
        tls_servername other.example`, tlsIP, tlsIP, cert))
	if got := answerA(t, perRoute.Addr, "secret.vault.acme.internal."); got != "10.0.3.1" {
		t.Errorf("with the route's tls_servername: %s, want 10.0.3.1", got)
	}
	if got := answerA(t, perRoute.Addr, "x.other.acme.internal."); got != "SERVFAIL" {
		t.Errorf("another route with the block's wrong tls_servername: %s, want SERVFAIL", got)
	}
}
