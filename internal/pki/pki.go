// Package pki is the certificate authority between the apiserver and the emulated kubelets: it
// signs the apiserver's kubelet client certificate and each kubelet's serving certificate, as a
// cluster's CA signs them for kubeadm. Keys are ECDSA P-256, quick enough to mint one per node
// on first use.
//
// It must not reach the network or the disk: callers write what the apiserver reads.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// validity is how long certificates are valid; a cluster lives minutes to days.
const validity = 10 * 365 * 24 * time.Hour

// CA signs certificates.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	now  func() time.Time
}

// NewCA returns a new self-signed CA named name; now is the clock its certificates start at.
func NewCA(name string, now func() time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	ca := &CA{key: key, now: now}
	der, err := ca.create(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return ca, nil
}

func (ca *CA) create(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = ca.now().Add(-time.Hour)
	tmpl.NotAfter = tmpl.NotBefore.Add(validity)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("pki: signing %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

// CertPEM is the CA's certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// Pool is a pool holding the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// KeyPair is a signed certificate and its key.
type KeyPair struct {
	TLS tls.Certificate
	// CertPEM and KeyPEM are the same, PEM-encoded.
	CertPEM, KeyPEM []byte
}

// Client signs a client certificate for user, in groups (the subject's organizations, as the
// apiserver and the kubelet read them).
func (ca *CA) Client(user string, groups ...string) (*KeyPair, error) {
	return ca.sign(&x509.Certificate{Subject: pkix.Name{CommonName: user, Organization: groups},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// Serving signs a serving certificate for name at the given addresses, as a kubelet's
// (CN system:node:NAME, the node's hostname and IPs as subject alternative names).
func (ca *CA) Serving(commonName string, dnsNames []string, ips ...net.IP) (*KeyPair, error) {
	return ca.sign(&x509.Certificate{Subject: pkix.Name{CommonName: commonName}, DNSNames: dnsNames, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
}

func (ca *CA) sign(tmpl *x509.Certificate) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generating a key: %w", err)
	}
	der, err := ca.create(tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	kp := &KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	kp.TLS, err = tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return kp, nil
}
