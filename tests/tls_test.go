package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// selfSigned writes a certificate and key for 127.0.0.1 and returns their
// paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sluice test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	s := StartServer(t, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--requirepass", "pw")
	c := s.Client(func(o *redis.Options) {
		o.Password = "pw"
		o.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	})
	setClock(t, c, future)
	got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "tls", 15, 30, 60))
	if got[0] != 0 || got[2] != 15 {
		t.Fatalf("CL.THROTTLE over TLS: %v", got)
	}
	// The protocol guard still sees (decrypted) requests.
	if err := c.Do(ctx(t), "ECHO", strings.Repeat("x", 100000)).Err(); err != nil {
		t.Fatalf("large ECHO over TLS: %v", err)
	}
	plain := s.Client(func(o *redis.Options) { o.Password = "pw"; o.MaxRetries = -1 })
	if err := plain.Ping(ctx(t)).Err(); err == nil {
		t.Fatal("a plaintext client was served on the TLS port")
	}
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("TLS client after a plaintext attempt: %v", err)
	}
}

func TestTLSBadCertificateRefusesStart(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "cert.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o600)
	out, err := startMustFail(t, "--addr", freeAddr(t), "--data-dir", t.TempDir(), "--tls-cert-file", bad, "--tls-key-file", bad)
	if err == nil || !strings.Contains(out, bad) {
		t.Fatalf("start with a bad certificate: err %v, output %q (want an error naming %s)", err, out, bad)
	}
}
