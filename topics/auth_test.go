package topics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"
)

// clientCert is a self-signed certificate and its key, PEM.
func clientCert(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

// TestAuthSealed: an endpoint's password, token, client secret and private
// key are sealed at rest like the signing secret, bound to their
// subscription and field, and come back as they were.
func TestAuthSealed(t *testing.T) {
	k := testKeys(t)
	cert, key := clientCert(t)
	for _, a := range []EndpointAuth{
		{Type: AuthBasic, Username: "hooks", Password: "correct-horse-battery"},
		{Type: AuthBearer, Token: "tok_0123456789abcdef"},
		{Type: AuthOAuth2, TokenURL: "https://auth.example/token", ClientID: "hookpipe", ClientSecret: "cs_0123456789abcdef", Scopes: []string{"webhooks:write"}},
		{Type: AuthMTLS, Certificate: cert, Key: key},
	} {
		s := rotated(t, "sub_1")
		s.Auth = &a
		b := s.EncodeWith(k)
		for _, secret := range a.Secrets() {
			if strings.Contains(string(b), secret) {
				t.Fatalf("%s: the stored value holds %q in plaintext: %s", a.Type, secret, b)
			}
		}
		got, err := DecodeSubscriptionWith(b, k)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got.Auth, a) {
			t.Fatalf("round trip: %+v, want %+v", *got.Auth, a)
		}
		moved := strings.Replace(string(b), `"id":"sub_1"`, `"id":"sub_2"`, 1)
		if _, err := DecodeSubscriptionWith([]byte(moved), k); err == nil {
			t.Fatalf("%s: sealed auth copied to another subscription opened", a.Type)
		}
	}
}

func TestAuthValidate(t *testing.T) {
	cert, key := clientCert(t)
	_, otherKey := clientCert(t)
	for _, tc := range []struct {
		auth  EndpointAuth
		field string
	}{
		{EndpointAuth{Type: "oauth3"}, "auth.type"},
		{EndpointAuth{Type: AuthBasic, Password: "p"}, "auth.username"},
		{EndpointAuth{Type: AuthBasic, Username: "a:b", Password: "p"}, "auth.username"},
		{EndpointAuth{Type: AuthBasic, Username: "u"}, "auth.password"},
		{EndpointAuth{Type: AuthBasic, Username: "u", Password: "p", Token: "t"}, "auth.token"},
		{EndpointAuth{Type: AuthBearer}, "auth.token"},
		{EndpointAuth{Type: AuthBearer, Token: "t", Username: "u"}, "auth.username"},
		{EndpointAuth{Type: AuthBearer, Token: "t\r\nX-Evil: 1"}, "auth"},
		{EndpointAuth{Type: AuthOAuth2, ClientID: "c", ClientSecret: "s"}, "auth.token_url"},
		{EndpointAuth{Type: AuthOAuth2, TokenURL: "auth.example/token", ClientID: "c", ClientSecret: "s"}, "auth.token_url"},
		{EndpointAuth{Type: AuthOAuth2, TokenURL: "https://c:s@auth.example/token", ClientID: "c", ClientSecret: "s"}, "auth.token_url"},
		{EndpointAuth{Type: AuthOAuth2, TokenURL: "https://auth.example/token", ClientSecret: "s"}, "auth.client_id"},
		{EndpointAuth{Type: AuthOAuth2, TokenURL: "https://auth.example/token", ClientID: "c"}, "auth.client_secret"},
		{EndpointAuth{Type: AuthOAuth2, TokenURL: "https://auth.example/token", ClientID: "c", ClientSecret: "s", Scopes: []string{"a b"}}, "auth.scopes"},
		{EndpointAuth{Type: AuthOAuth2, TokenURL: "https://auth.example/token", ClientID: "c", ClientSecret: "s", Token: "t"}, "auth.token"},
		{EndpointAuth{Type: AuthMTLS, Key: key}, "auth.certificate"},
		{EndpointAuth{Type: AuthMTLS, Certificate: cert}, "auth.key"},
		{EndpointAuth{Type: AuthMTLS, Certificate: cert, Key: otherKey}, "auth.certificate"},
		{EndpointAuth{Type: AuthMTLS, Certificate: "not pem", Key: key}, "auth.certificate"},
		{EndpointAuth{Type: AuthMTLS, Certificate: cert, Key: key, CA: "not pem"}, "auth.ca"},
		{EndpointAuth{Type: AuthMTLS, Certificate: cert, Key: key, Password: "p"}, "auth.password"},
		{EndpointAuth{Type: AuthBasic, Username: "u", Password: "p", Certificate: cert}, "auth.certificate"},
	} {
		s := Subscription{ID: "sub_1", URL: "https://a.example/", EventTypes: []string{"*"}, Secret: mustSecret(t), Auth: &tc.auth}
		wantInvalid(t, s.Validate(), "subscription", tc.field)
	}
	s := Subscription{ID: "sub_1", URL: "https://a.example/", EventTypes: []string{"*"}, Secret: mustSecret(t),
		Auth: &EndpointAuth{Type: AuthBearer, Token: "t"}, Headers: map[string]string{"authorization": "Bearer x"}}
	wantInvalid(t, s.Validate(), "subscription", "headers")
}

// TestMTLSNeedsHTTPS: a client certificate is for a TLS endpoint.
func TestMTLSNeedsHTTPS(t *testing.T) {
	cert, key := clientCert(t)
	s := Subscription{ID: "sub_1", URL: "http://a.example/", EventTypes: []string{"*"}, Secret: mustSecret(t),
		Auth: &EndpointAuth{Type: AuthMTLS, Certificate: cert, Key: key}}
	wantInvalid(t, s.Validate(), "subscription", "auth.type")
	s.URL = "https://a.example/"
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}
