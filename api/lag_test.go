package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestLagShowsHeldKeys: GET /v1/lag (admin only) counts the ordered keys
// held and names the one held longest, its head and since when; the
// dashboard's overview shows them.
func TestLagShowsHeldKeys(t *testing.T) {
	c := newCluster(t)
	r := c.replica()
	since := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Millisecond)
	for key, h := range map[string]*topics.Hold{
		"sub_a/old": {Head: "evt_old", HeadAttempt: 2, ParkedFrom: -1, Through: -1, Since: since},
		"sub_a/new": {Head: "evt_new", HeadAttempt: 2, ParkedFrom: -1, Through: -1, Since: time.Now()},
	} {
		if err := c.cl.ProduceSync(testkit.Ctx(t, 10*time.Second), &kgo.Record{Topic: c.names.Holds(), Key: []byte(key), Value: h.Encode()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var out service.LagOutput
	testkit.WaitFor(t, 20*time.Second, "both held keys in the lag", func() bool {
		r.must(200, "GET", "/v1/lag", adminKey, nil, &out.Body)
		return out.Body.Holds != nil && out.Body.Holds.Keys == 2
	})
	if h := out.Body.Holds; h.Longest != "sub_a/old" || h.Head != "evt_old" || h.Since == nil || !h.Since.Equal(since) {
		t.Fatalf("holds %+v, want sub_a/old behind evt_old since %v the longest", h, since)
	}
	u := r.uiClient()
	u.signIn(adminKey)
	want := "2 · longest sub_a/old, behind event evt_old since " + since.Format("2006-01-02 15:04:05")
	if status, body := u.get("/ui/"); status != http.StatusOK || !strings.Contains(body, want) {
		t.Fatalf("overview: %d, no %q in it", status, want)
	}
}
