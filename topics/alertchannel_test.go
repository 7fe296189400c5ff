package topics

import (
	"bytes"
	"errors"
	"testing"
)

func TestAlertChannelValidate(t *testing.T) {
	ok := func() AlertChannel {
		return AlertChannel{ID: "ach_1", Tenant: "acme", Kind: AlertEmail, To: []string{"ops@example.com"}}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*AlertChannel)
		field string // "" when valid
	}{
		{"email", func(*AlertChannel) {}, ""},
		{"operators", func(c *AlertChannel) { c.Tenant = "" }, ""},
		{"slack", func(c *AlertChannel) { c.Kind, c.To, c.URL = AlertSlack, nil, "https://hooks.example.com/T/B/x" }, ""},
		{"webhook with types", func(c *AlertChannel) {
			c.Kind, c.To, c.URL, c.Types = AlertWebhook, nil, "https://example.com/alerts", []string{NoticeFailing}
		}, ""},
		{"no id", func(c *AlertChannel) { c.ID = "" }, "id"},
		{"bad tenant", func(c *AlertChannel) { c.Tenant = "a b" }, "tenant"},
		{"no kind", func(c *AlertChannel) { c.Kind = "" }, "kind"},
		{"unknown kind", func(c *AlertChannel) { c.Kind = "pager" }, "kind"},
		{"no recipient", func(c *AlertChannel) { c.To = nil }, "to"},
		{"bad recipient", func(c *AlertChannel) { c.To = []string{"Ops <ops@example.com>"} }, "to"},
		{"email with url", func(c *AlertChannel) { c.URL = "https://example.com" }, "url"},
		{"slack without url", func(c *AlertChannel) { c.Kind, c.To = AlertSlack, nil }, "url"},
		{"slack with ftp", func(c *AlertChannel) { c.Kind, c.To, c.URL = AlertSlack, nil, "ftp://example.com" }, "url"},
		{"webhook with to", func(c *AlertChannel) { c.Kind, c.URL = AlertWebhook, "https://example.com" }, "to"},
		{"ordinary type", func(c *AlertChannel) { c.Types = []string{"order.created"} }, "types"},
		{"short digest", func(c *AlertChannel) { c.DigestMS = 10 }, "digest_ms"},
		{"long digest", func(c *AlertChannel) { c.DigestMS = 25 * 3600 * 1000 }, "digest_ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.edit(&c)
			err := c.Validate()
			var ie *InvalidError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &ie) || ie.Field != tc.field):
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
			if err == nil {
				back, err := DecodeAlertChannel(c.Encode())
				if err != nil || back.ID != c.ID || back.Kind != c.Kind {
					t.Fatalf("round trip: %+v, %v", back, err)
				}
			}
		})
	}
}

func TestAlertChannelHears(t *testing.T) {
	acme := AlertChannel{Tenant: "acme"}
	ops := AlertChannel{}
	failingOnly := AlertChannel{Tenant: "acme", Types: []string{NoticeFailing}}
	for _, tc := range []struct {
		c           AlertChannel
		tenant, typ string
		want        bool
	}{
		{acme, "acme", NoticeFailing, true},
		{acme, "globex", NoticeFailing, false},
		{acme, "acme", "order.created", false},
		{ops, "globex", NoticeMessageDead, true},
		{ops, "", NoticeDisabled, true},
		{failingOnly, "acme", NoticeFailing, true},
		{failingOnly, "acme", NoticeRecovered, false},
	} {
		if got := tc.c.Hears(tc.tenant, tc.typ); got != tc.want {
			t.Errorf("%+v hears %s of %q = %v, want %v", tc.c, tc.typ, tc.tenant, got, tc.want)
		}
	}
	if d := (&AlertChannel{}).Digest(); d != DefaultDigestWindow {
		t.Errorf("default digest %v", d)
	}
}

// TestAlertChannelURLSealed: with a keyring the URL is sealed at rest and
// opens with the same keyring only, bound to the channel's id.
func TestAlertChannelURLSealed(t *testing.T) {
	k, err := ParseKeyring("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	if err != nil {
		t.Fatal(err)
	}
	c := AlertChannel{ID: "ach_1", Tenant: "acme", Kind: AlertSlack, URL: "https://hooks.example.com/services/T0/B0/s3cret"}
	b := c.EncodeWith(k)
	if bytes.Contains(b, []byte("s3cret")) {
		t.Fatalf("sealed record holds the URL: %s", b)
	}
	got, err := DecodeAlertChannelWith(b, k)
	if err != nil || got.URL != c.URL {
		t.Fatalf("opened %q, %v", got.URL, err)
	}
	var ie *InvalidError
	if _, err := DecodeAlertChannel(b); !errors.As(err, &ie) || ie.Field != "url" {
		t.Errorf("opened without the keyring: %v", err)
	}
	copied := bytes.Replace(b, []byte(`"ach_1"`), []byte(`"ach_2"`), 1)
	if _, err := DecodeAlertChannelWith(copied, k); !errors.As(err, &ie) || ie.Field != "url" {
		t.Errorf("a sealed URL copied into another channel opened: %v", err)
	}
	if plain, err := DecodeAlertChannelWith(c.Encode(), k); err != nil || plain.URL != c.URL {
		t.Errorf("a plaintext URL with a keyring: %q, %v", plain.URL, err)
	}
}
