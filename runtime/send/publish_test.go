package send

import (
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// destinationSub is a subscription delivering to d, with a header of its
// own; it fails t unless it is valid.
func destinationSub(t testing.TB, d *topics.Destination) topics.Subscription {
	t.Helper()
	sub := newSub(t, "sub_"+d.Type, "")
	sub.Headers = map[string]string{"X-Tenant": "acme"}
	sub.Target(d, "")
	if err := sub.Validate(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// withoutUser splits a test server's URL into the URL a destination
// holds (no credentials: they have fields of their own) and the user
// and password it carried.
func withoutUser(t testing.TB, raw string) (u, user, password string) {
	t.Helper()
	p, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	user = p.User.Username()
	password, _ = p.User.Password()
	p.User = nil
	return p.String(), user, password
}

// closedPort is an address of 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// sendKeyed sends the deliveries of ids in order, each with the ordering
// key key, and fails t unless each succeeded.
func sendKeyed(t *testing.T, s *Sender, sub *topics.Subscription, key string, ids ...string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	for _, id := range ids {
		d := newDelivery(sub.ID, id)
		d.Key = key
		resp, err := s.Send(ctx, sub, &d, nil)
		if res := classify.For(sub, resp.Status, err); res.Action != classify.Success {
			t.Fatalf("send %s: %v (%v)", id, res, err)
		}
	}
}

// refusal is a change to a working destination and how its attempt is
// classified.
type refusal struct {
	name   string
	edit   func(*topics.Destination)
	h      HTTP
	action classify.Action
	cat    string
}

// testRefusals sends one delivery per case to base's destination edited
// by the case, from a Sender of the case's settings, and checks how the
// attempt is classified.
func testRefusals(t *testing.T, base func(*testing.T) *topics.Destination, cases []refusal) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := base(t)
			tc.edit(d)
			sub := destinationSub(t, d)
			s := New(tc.h, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
			t.Cleanup(s.Close)
			del := newDelivery(sub.ID, "evt_r")
			resp, err := s.Send(testCtx(t, 30*time.Second), &sub, &del, nil)
			if res := classify.For(&sub, resp.Status, err); res.Action != tc.action || res.Category != tc.cat {
				t.Fatalf("got %v/%s (%v), want %v/%s", res.Action, res.Category, err, tc.action, tc.cat)
			}
		})
	}
}

// guarded is a Sender's settings without an allowlist: the SSRF guard
// refuses the loopback test servers.
var guarded = HTTP{ConnectTimeout: 5 * time.Second}
