package send

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// TestProbe: a probe is an attempt as the deliverer makes it (signed,
// classified, the SSRF guard in the way), whose answer comes back with
// the first 1 KiB of the body.
func TestProbe(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		switch r.Header.Get("webhook-id") {
		case "evt_ok":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("thanks"))
		case "evt_busy":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(strings.Repeat("é", 1500))) // 3,000 bytes of 2-byte characters
		}
	})
	sub := newSub(t, "sub_p", rc.url())
	allowed := NewProber(HTTP{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ConnectTimeout: time.Second})
	ctx := testCtx(t, 20*time.Second)

	del := newDelivery(sub.ID, "evt_ok")
	res := allowed.Probe(ctx, &sub, &del)
	if !res.Delivered || res.Status != 201 || res.Body != "thanks" || res.Category != "" || res.Duration <= 0 {
		t.Fatalf("probe of a 201: %+v", res)
	}
	got := rc.waitRequest(t, "evt_ok")
	verify(t, got.header, got.body, sub.Secret)

	del = newDelivery(sub.ID, "evt_busy")
	res = allowed.Probe(ctx, &sub, &del)
	if res.Delivered || res.Status != 503 || res.Category != topics.FailureServerError {
		t.Fatalf("probe of a 503: %+v", res)
	}
	if len(res.Body) != 1024 || strings.ContainsRune(res.Body, '\uFFFD') {
		t.Fatalf("body sample of %d bytes (cut characters replaced: %v), want 1 KiB of whole characters",
			len(res.Body), strings.ContainsRune(res.Body, '\uFFFD'))
	}

	guarded := NewProber(HTTP{ConnectTimeout: time.Second})
	del = newDelivery(sub.ID, "evt_blocked")
	res = guarded.Probe(ctx, &sub, &del)
	if res.Delivered || res.Status != 0 || res.Category != topics.FailureBlockedAddr || res.Error == "" {
		t.Fatalf("probe of a loopback endpoint without the allowlist: %+v", res)
	}
}

func TestSampleOf(t *testing.T) {
	for in, want := range map[string]string{
		"plain":           "plain",
		"cut é\xc3":       "cut é",
		"cut 😀"[:7]:       "cut ",
		"bad \xff inside": "bad \uFFFD inside",
		"":                "",
	} {
		if got := sampleOf([]byte(in)); got != want {
			t.Errorf("sampleOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	sub := newSub(t, "sub_r", "https://example.com/")
	sub.Headers = map[string]string{"Authorization": "Bearer t0ken-value", "X-Short": "ab"}
	sample := "echo: " + sub.Secret + " " + strings.TrimPrefix(sub.Secret, topics.SecretPrefix) + " Bearer t0ken-value ab"
	got := Redact(sample, &sub, time.Now())
	if strings.Contains(got, strings.TrimPrefix(sub.Secret, topics.SecretPrefix)) || strings.Contains(got, "t0ken") {
		t.Fatalf("redact left a secret in %q", got)
	}
	if !strings.HasSuffix(got, " ab") {
		t.Fatalf("redact hid a short header value: %q", got)
	}
}
