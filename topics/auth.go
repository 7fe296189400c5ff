package topics

import "strings"

// Endpoint authentication types (Subscription.Auth).
const (
	AuthBasic  = "basic"  // Authorization: Basic, username and password
	AuthBearer = "bearer" // Authorization: Bearer, a static token
)

// EndpointAuth is how the deliverer authenticates to a subscription's
// endpoint, besides signing. Password and Token are sealed at rest like the
// signing secret (fields "auth.password" and "auth.token").
type EndpointAuth struct {
	Type     string `json:"type"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
}

// secrets are the sealed fields, by their sealing name.
func (a *EndpointAuth) secrets() []struct {
	name string
	v    *string
} {
	return []struct {
		name string
		v    *string
	}{{"auth.password", &a.Password}, {"auth.token", &a.Token}}
}

// Secrets are the values the deliverer must never show: the password or
// the token.
func (a *EndpointAuth) Secrets() []string {
	if a == nil {
		return nil
	}
	var out []string
	for _, s := range a.secrets() {
		if *s.v != "" {
			out = append(out, *s.v)
		}
	}
	return out
}

func (a *EndpointAuth) validate() error {
	const maxLen = 4096
	switch a.Type {
	case AuthBasic:
		switch {
		case a.Username == "" || strings.Contains(a.Username, ":"):
			return invalid("subscription", "auth.username", "basic auth needs a username without ':'")
		case a.Password == "":
			return invalid("subscription", "auth.password", "basic auth needs a password")
		case a.Token != "":
			return invalid("subscription", "auth.token", "basic auth has no token")
		}
	case AuthBearer:
		switch {
		case a.Token == "":
			return invalid("subscription", "auth.token", "bearer auth needs a token")
		case a.Username != "" || a.Password != "":
			return invalid("subscription", "auth.username", "bearer auth has no username or password")
		}
	default:
		return invalid("subscription", "auth.type", "%q is not basic or bearer", a.Type)
	}
	for _, v := range []string{a.Username, a.Password, a.Token} {
		if len(v) > maxLen || strings.ContainsAny(v, "\r\n\x00") {
			return invalid("subscription", "auth", "values are at most %d characters, without control characters", maxLen)
		}
	}
	return nil
}
