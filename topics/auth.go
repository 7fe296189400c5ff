package topics

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"strings"
)

// Endpoint authentication types (Subscription.Auth).
const (
	AuthBasic  = "basic"  // Authorization: Basic, username and password
	AuthBearer = "bearer" // Authorization: Bearer, a static token
	AuthOAuth2 = "oauth2" // Authorization: Bearer, a token from an OAuth2 client-credentials grant
	AuthMTLS   = "mtls"   // a TLS client certificate
)

// EndpointAuth is how the deliverer authenticates to a subscription's
// endpoint, besides signing. Its secret fields (password, token, client
// secret, private key) are sealed at rest like the signing secret.
type EndpointAuth struct {
	Type     string `json:"type"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`

	// OAuth2 client credentials (RFC 6749, section 4.4): the deliverer asks
	// TokenURL for a token and sends it as a bearer token.
	TokenURL     string   `json:"token_url,omitempty"`
	ClientID     string   `json:"client_id,omitempty"`
	ClientSecret string   `json:"client_secret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`

	// Mutual TLS: the client certificate and its private key, PEM, and
	// optionally the CA certificates that sign the endpoint's certificate
	// (without them, the system's roots).
	Certificate string `json:"certificate,omitempty"`
	Key         string `json:"key,omitempty"`
	CA          string `json:"ca,omitempty"`
}

// secrets are the sealed fields, by their sealing name.
func (a *EndpointAuth) secrets() secretFields {
	return secretFields{{"auth.password", &a.Password}, {"auth.token", &a.Token}, {"auth.client_secret", &a.ClientSecret}, {"auth.key", &a.Key}}
}

// Secrets are the values the deliverer must never show: the password, the
// token, the client secret or the private key.
func (a *EndpointAuth) Secrets() []string {
	if a == nil {
		return nil
	}
	return a.secrets().values()
}

// Masked is a copy of a with each secret that is set replaced by mask.
func (a EndpointAuth) Masked(mask string) *EndpointAuth {
	a.secrets().replace(func(string, string) string { return mask })
	return &a
}

// Limits of the auth fields.
const (
	maxAuthValue = 4096     // a username, password, token, URL, id or scope
	maxAuthPEM   = 64 << 10 // a certificate chain, key or CA bundle
	maxScopes    = 32
)

func (a *EndpointAuth) validate() error {
	if err := a.validateType(); err != nil {
		return err
	}
	for _, v := range append([]string{a.Username, a.Password, a.Token, a.TokenURL, a.ClientID, a.ClientSecret}, a.Scopes...) {
		if len(v) > maxAuthValue || strings.ContainsAny(v, "\r\n\x00") {
			return invalid("subscription", "auth", "values are at most %d characters, without control characters", maxAuthValue)
		}
	}
	for _, v := range []string{a.Certificate, a.Key, a.CA} {
		if len(v) > maxAuthPEM {
			return invalid("subscription", "auth", "a certificate or key is at most %d bytes of PEM", maxAuthPEM)
		}
	}
	return nil
}

// validateType checks that the fields of the type are given and no others.
func (a *EndpointAuth) validateType() error {
	has := func(names ...string) string { // the first of names that is set
		set := map[string]bool{"username": a.Username != "", "password": a.Password != "", "token": a.Token != "",
			"token_url": a.TokenURL != "", "client_id": a.ClientID != "", "client_secret": a.ClientSecret != "",
			"scopes": len(a.Scopes) > 0, "certificate": a.Certificate != "", "key": a.Key != "", "ca": a.CA != ""}
		for _, n := range names {
			if set[n] {
				return n
			}
		}
		return ""
	}
	oauth := []string{"token_url", "client_id", "client_secret", "scopes"}
	mtls := []string{"certificate", "key", "ca"}
	switch a.Type {
	case AuthBasic:
		switch {
		case a.Username == "" || strings.Contains(a.Username, ":"):
			return invalid("subscription", "auth.username", "basic auth needs a username without ':'")
		case a.Password == "":
			return invalid("subscription", "auth.password", "basic auth needs a password")
		}
		if f := has(append(append([]string{"token"}, oauth...), mtls...)...); f != "" {
			return invalid("subscription", "auth."+f, "basic auth has no %s", f)
		}
	case AuthBearer:
		if a.Token == "" {
			return invalid("subscription", "auth.token", "bearer auth needs a token")
		}
		if f := has(append(append([]string{"username", "password"}, oauth...), mtls...)...); f != "" {
			return invalid("subscription", "auth."+f, "bearer auth has no %s", f)
		}
	case AuthOAuth2:
		if err := a.validateOAuth2(); err != nil {
			return err
		}
		if f := has(append([]string{"username", "password", "token"}, mtls...)...); f != "" {
			return invalid("subscription", "auth."+f, "oauth2 auth has no %s", f)
		}
	case AuthMTLS:
		if err := a.validateMTLS(); err != nil {
			return err
		}
		if f := has(append([]string{"username", "password", "token"}, oauth...)...); f != "" {
			return invalid("subscription", "auth."+f, "mtls auth has no %s", f)
		}
	default:
		return invalid("subscription", "auth.type", "%q is not basic, bearer, oauth2 or mtls", a.Type)
	}
	return nil
}

func (a *EndpointAuth) validateOAuth2() error {
	u, err := url.Parse(a.TokenURL)
	switch {
	case a.TokenURL == "":
		return invalid("subscription", "auth.token_url", "oauth2 auth needs the token endpoint's URL")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return invalid("subscription", "auth.token_url", "%q is not an absolute http or https URL", a.TokenURL)
	case u.User != nil:
		return invalid("subscription", "auth.token_url", "holds credentials; give them as client_id and client_secret")
	case a.ClientID == "":
		return invalid("subscription", "auth.client_id", "oauth2 auth needs a client id")
	case a.ClientSecret == "":
		return invalid("subscription", "auth.client_secret", "oauth2 auth needs a client secret")
	case len(a.Scopes) > maxScopes:
		return invalid("subscription", "auth.scopes", "%d scopes; at most %d", len(a.Scopes), maxScopes)
	}
	for _, s := range a.Scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			return invalid("subscription", "auth.scopes", "%q is not a scope (RFC 6749: no spaces, quotes or backslashes)", s)
		}
	}
	return nil
}

func (a *EndpointAuth) validateMTLS() error {
	switch {
	case a.Certificate == "":
		return invalid("subscription", "auth.certificate", "mtls auth needs a client certificate (PEM)")
	case a.Key == "":
		return invalid("subscription", "auth.key", "mtls auth needs the certificate's private key (PEM)")
	}
	// The parse errors name neither the key nor its bytes.
	if _, err := tls.X509KeyPair([]byte(a.Certificate), []byte(a.Key)); err != nil {
		return invalid("subscription", "auth.certificate", "not a certificate and matching private key in PEM: %v", err)
	}
	if a.CA != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(a.CA)) {
		return invalid("subscription", "auth.ca", "holds no PEM certificate")
	}
	return nil
}

// ClientCertificate is the mtls auth's certificate and key, parsed.
func (a *EndpointAuth) ClientCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair([]byte(a.Certificate), []byte(a.Key))
}
