package topics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCheckSchedule: deliver_at is RFC 3339, at most 7 days after the
// publish time and not more than the skew before it.
func TestCheckSchedule(t *testing.T) {
	ref := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, at, want string // want: a part of the error, "" for none
	}{
		{"none", "", ""},
		{"ahead", "2026-11-26T12:00:05Z", ""},
		{"other zone", "2026-11-27T12:00:00+02:00", ""},
		{"exactly 7 days", "2026-12-03T12:00:00Z", ""},
		{"over 7 days", "2026-12-03T12:00:00.001Z", "more than 7 days"},
		{"within the skew", "2026-11-26T11:59:30Z", ""},
		{"past", "2026-11-26T11:58:59Z", "in the past"},
		{"not RFC 3339", "2026-11-26 12:00:05", "not an RFC 3339 time"},
		{"unix seconds", "1795694405", "not an RFC 3339 time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Event{ID: "e", Type: "t", Data: []byte("1"), DeliverAt: tc.at}
			err := e.CheckSchedule(ref, time.Minute)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckSchedule(%q) = %v", tc.at, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "deliver_at") || !errors.Is(err, ErrInvalid) {
				t.Fatalf("CheckSchedule(%q) = %v, want an invalid deliver_at: %s", tc.at, err, tc.want)
			}
		})
	}
	t.Run("a bad format makes the event invalid", func(t *testing.T) {
		_, err := DecodeEvent([]byte(`{"id":"e","type":"t","data":1,"deliver_at":"tomorrow"}`), 0)
		if err == nil || !strings.Contains(err.Error(), "deliver_at") {
			t.Fatalf("DecodeEvent = %v, want an invalid deliver_at", err)
		}
	})
}

// TestHop: a scheduled delivery waits in the tier of the time left until
// deliver_at, unless more than twice the longest tier is left; then it
// waits the longest tier and hops again. No wait is longer than the next
// tier's delay (twice the longest's) nor, unless less than the shortest
// tier is left, shorter than its tier's.
func TestHop(t *testing.T) {
	n, err := NewNames(DefaultPrefix, DefaultRetryTiers) // 5s,5m,30m,2h,5h,10h
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		left, tier, wait time.Duration
	}{
		{time.Second, 5 * time.Second, time.Second},
		{5 * time.Second, 5 * time.Second, 5 * time.Second},
		{4*time.Minute + 59*time.Second, 5 * time.Second, 4*time.Minute + 59*time.Second},
		{6 * time.Minute, 5 * time.Minute, 6 * time.Minute},
		{9 * time.Hour, 5 * time.Hour, 9 * time.Hour},
		{20 * time.Hour, 10 * time.Hour, 20 * time.Hour},
		{20*time.Hour + time.Millisecond, 10 * time.Hour, 10 * time.Hour},
		{3 * 24 * time.Hour, 10 * time.Hour, 10 * time.Hour},
		{MaxScheduleAhead, 10 * time.Hour, 10 * time.Hour},
	} {
		tier, due := n.Hop(now, now.Add(tc.left))
		if tier != tc.tier || due.Sub(now) != tc.wait {
			t.Errorf("Hop with %v left = tier %v, wait %v; want tier %v, wait %v", tc.left, tier, due.Sub(now), tc.tier, tc.wait)
		}
	}
	t.Run("seven days hop to deliver_at in bounded waits", func(t *testing.T) {
		at, deliverAt, hops := now, now.Add(MaxScheduleAhead), 0
		for at.Before(deliverAt) {
			tier, due := n.Hop(at, deliverAt)
			wait := due.Sub(at)
			next := 2 * tier
			if i := indexOf(n.Tiers, tier); i+1 < len(n.Tiers) {
				next = n.Tiers[i+1]
			}
			if wait > next || wait < tier && deliverAt.Sub(at) >= n.Tiers[0] || due.After(deliverAt) {
				t.Fatalf("hop %d from %v: waits %v in tier %v", hops, at, wait, tier)
			}
			at, hops = due, hops+1
		}
		if !at.Equal(deliverAt) || hops > 17 {
			t.Fatalf("reached %v after %d hops, want %v within 17", at, hops, deliverAt)
		}
	})
}

func indexOf(ts []time.Duration, d time.Duration) int {
	for i, t := range ts {
		if t == d {
			return i
		}
	}
	return -1
}

// TestScheduledRecord: the first wait of a scheduled delivery is a tier
// record carrying deliver_at in its value and header, due as Hop says.
func TestScheduledRecord(t *testing.T) {
	n, err := NewNames(DefaultPrefix, DefaultRetryTiers)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	deliverAt := now.Add(3*24*time.Hour + 400*time.Microsecond) // rounded up to the millisecond
	ev := &Event{ID: "evt_1", Type: "order.created", Tenant: "acme", Data: []byte(`{"a":1}`), DeliverAt: deliverAt.Format(time.RFC3339Nano)}
	sub := &Subscription{ID: "sub_1"}
	r := ScheduledRecord(&kgo.Record{Timestamp: now}, ev, sub, n, deliverAt, now)
	if r.Topic != n.Retry(10*time.Hour) || string(r.Key) != sub.DeliveryKey(ev) {
		t.Fatalf("record on %s keyed %q", r.Topic, r.Key)
	}
	d, err := DecodeDelivery(r.Value)
	if err != nil {
		t.Fatal(err)
	}
	want := now.Add(3*24*time.Hour + time.Millisecond)
	if !d.DeliverAt.Equal(want) || !d.NotBefore.Equal(now.Add(10*time.Hour)) || d.Attempt != 1 {
		t.Fatalf("delivery deliver_at %v, not_before %v, attempt %d", d.DeliverAt, d.NotBefore, d.Attempt)
	}
	if h, ok := DeliverAtOf(r); !ok || !h.Equal(want) {
		t.Fatalf("deliver_at header %v %v, want %v", h, ok, want)
	}
	if h, ok := NotBeforeOf(r); !ok || !h.Equal(d.NotBefore) {
		t.Fatalf("not-before header %v %v, want %v", h, ok, d.NotBefore)
	}
}

func TestCancellation(t *testing.T) {
	c := Cancellation{EventID: "evt_1", Tenant: "acme", CancelledAt: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	got, err := DecodeCancellation(c.Key(), c.Encode())
	if err != nil || got != c {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	if _, err := DecodeCancellation(CancellationKey("", "evt_1"), c.Encode()); err == nil {
		t.Fatal("a tenant's cancellation under an administrator's key was taken")
	}
	d := &Delivery{EventID: "evt_1", Tenant: "acme"}
	if keys := CancellationKeys(d); len(keys) != 2 || keys[0] != "/evt_1" || keys[1] != "acme/evt_1" {
		t.Fatalf("CancellationKeys = %q", keys)
	}
	if keys := CancellationKeys(&Delivery{EventID: "evt_1"}); len(keys) != 1 {
		t.Fatalf("CancellationKeys without a tenant = %q", keys)
	}
}
