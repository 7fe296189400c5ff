package topics

import (
	"strings"
	"testing"
)

// TestAuthSealed: an endpoint's password and token are sealed at rest like
// the signing secret, bound to their subscription and field, and come back
// as they were.
func TestAuthSealed(t *testing.T) {
	k := testKeys(t)
	for _, a := range []EndpointAuth{
		{Type: AuthBasic, Username: "hooks", Password: "correct-horse-battery"},
		{Type: AuthBearer, Token: "tok_0123456789abcdef"},
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
		if *got.Auth != a {
			t.Fatalf("round trip: %+v, want %+v", *got.Auth, a)
		}
		moved := strings.Replace(string(b), `"id":"sub_1"`, `"id":"sub_2"`, 1)
		if _, err := DecodeSubscriptionWith([]byte(moved), k); err == nil {
			t.Fatalf("%s: sealed auth copied to another subscription opened", a.Type)
		}
	}
}

func TestAuthValidate(t *testing.T) {
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
	} {
		s := Subscription{ID: "sub_1", URL: "https://a.example/", EventTypes: []string{"*"}, Secret: mustSecret(t), Auth: &tc.auth}
		wantInvalid(t, s.Validate(), "subscription", tc.field)
	}
	s := Subscription{ID: "sub_1", URL: "https://a.example/", EventTypes: []string{"*"}, Secret: mustSecret(t),
		Auth: &EndpointAuth{Type: AuthBearer, Token: "t"}, Headers: map[string]string{"authorization": "Bearer x"}}
	wantInvalid(t, s.Validate(), "subscription", "headers")
}
