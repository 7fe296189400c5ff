package retrier

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// These tests run the cluster, the retrier and the test's clients in a
// testing/synctest bubble over kfake's virtual network, so hours of tier
// delay pass in a moment and every duration they check is virtual, exact
// and independent of the machine's load.

// virtualEnv is the retrier configuration in a bubble: a session timeout
// long enough that the group does not heartbeat for nothing all day.
func virtualEnv(more map[string]string) map[string]string {
	env := map[string]string{kafka.EnvSessionTimeout: "5m"}
	for k, v := range more {
		env[k] = v
	}
	return env
}

// TestVirtualTenHourTier: a record of the 10h tier is released when its ten
// virtual hours are up, not a moment before.
func TestVirtualTenHourTier(t *testing.T) {
	t.Parallel()
	defer testkit.Watchdog(t, time.Minute)()
	wall := time.Now()
	synctest.Test(t, func(t *testing.T) {
		var vn kfake.VirtualNetwork
		// The loop wakes every commit interval: keep the default (1s).
		h := newHarness(t, virtualEnv(map[string]string{
			kafka.EnvRetryTiers:                "5s,10h",
			"WEBHOOKS_RETRIER_COMMIT_INTERVAL": "1s",
		}), &vn)
		start := time.Now()
		due := start.Add(10 * time.Hour)
		r := h.produce(h.retryRecord(10*time.Hour, "sub", "evt_10h", due, true))[0]
		h.start(h.config())

		cl := h.client(
			kgo.ConsumeTopics(h.names.Redeliveries()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.FetchMaxWait(time.Hour),
		)
		ctx, cancel := context.WithTimeout(context.Background(), 11*time.Hour)
		defer cancel()
		var got []*kgo.Record
		for len(got) == 0 && ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
		}
		at := time.Now()
		if len(got) != 1 {
			t.Fatalf("read %d records from redeliveries within 11 virtual hours, want 1", len(got))
		}
		// The poll above returns as soon as anything is released: at
		// returning after due proves nothing was released earlier.
		checkReleased(t, received{got[0], at}, r, due)
		if late := at.Sub(due); late > time.Second {
			t.Errorf("released %v after its due time, want within a second", late)
		}
	})
	t.Logf("ten virtual hours took %v of real time", time.Since(wall))
}

// TestVirtualCommitInterval: a release is committed within the commit
// interval, also when the retrier is otherwise idle and the release came
// right after a commit.
func TestVirtualCommitInterval(t *testing.T) {
	t.Parallel()
	defer testkit.Watchdog(t, time.Minute)()
	synctest.Test(t, func(t *testing.T) {
		var vn kfake.VirtualNetwork
		h := newHarness(t, virtualEnv(map[string]string{"WEBHOOKS_RETRIER_COMMIT_INTERVAL": "100ms"}), &vn)
		h.tail()
		cfg := h.config()
		// The first release is committed at once (the last commit was
		// long ago); the second comes 30ms after that commit.
		due := time.Now().Add(5 * time.Second).Truncate(time.Millisecond)
		rs := h.produce(
			h.retryRecord(time.Second, "sub", "evt_first", due, true),
			h.retryRecord(time.Second, "sub", "evt_second", due.Add(30*time.Millisecond), true),
		)
		h.start(cfg)
		last := rs[1]
		got := h.waitReceived(time.Minute, last)
		checkReleased(t, got, last, due.Add(30*time.Millisecond))

		var commit kfake.GroupCommit
		waitEvery(t, 10*time.Millisecond, time.Minute, "the releases to be committed", func() bool {
			g := h.cluster.GroupInfo(cfg.Group)
			if g == nil {
				return false
			}
			c, ok := g.Commits[last.Topic][last.Partition]
			commit = c
			return ok && c.Offset == last.Offset+1
		})
		if after := commit.At.Sub(got.rec.Timestamp); after > 2*cfg.CommitInterval {
			t.Errorf("committed %v after the release, want within %v (twice the commit interval)", after, 2*cfg.CommitInterval)
		}
	})
}

// TestVirtualPausedPartitionComesBack: a paused partition that is revoked
// (another retrier joined) and later assigned back (it left) is fetched
// again: its records are released when due.
func TestVirtualPausedPartitionComesBack(t *testing.T) {
	t.Parallel()
	defer testkit.Watchdog(t, time.Minute)()
	synctest.Test(t, func(t *testing.T) {
		var vn kfake.VirtualNetwork
		h := newHarness(t, virtualEnv(map[string]string{
			kafka.EnvRetryTiers:                       "1m",
			"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "2",
		}), &vn)
		h.tail()
		cfg := h.config()
		now := time.Now()
		due := now.Add(30 * time.Minute)
		// Every partition: two records due in 30 minutes fill the window
		// (so it pauses) and a marker due now shows they were fetched.
		var held, marks []*kgo.Record
		for p := range int32(partitions) {
			sub := subOn(t, p)
			held = append(held, h.produce(
				h.retryRecord(time.Minute, sub, sub+"_1", due, true),
				h.retryRecord(time.Minute, sub, sub+"_2", due, true),
			)...)
			marks = append(marks, h.produce(h.retryRecord(time.Minute, sub, sub+"_mark", now, true))...)
		}
		members := func(n int, each func(kfake.GroupMember) bool) func() bool {
			return func() bool {
				g := h.cluster.GroupInfo(cfg.Group)
				if g == nil || g.State != "Stable" || len(g.Members) != n {
					return false
				}
				for _, m := range g.Members {
					if !each(m) {
						return false
					}
				}
				return true
			}
		}

		h.start(cfg)
		for _, m := range marks {
			h.waitReceived(time.Minute, m)
		}
		// Every partition is paused on the first retrier. A second one
		// takes some of them, then leaves and gives them back.
		second := h.start(cfg)
		waitEvery(t, time.Second, 10*time.Minute, "two members sharing the partitions", members(2, func(m kfake.GroupMember) bool { return m.NumAssigned() > 0 }))
		second.StopOK(t)
		waitEvery(t, time.Second, 10*time.Minute, "the first member owning every partition again", members(1, func(m kfake.GroupMember) bool { return m.NumAssigned() == partitions }))
		if !time.Now().Before(due) {
			t.Fatalf("setup: the group settled after the held records were due")
		}

		for _, r := range held {
			checkReleased(t, h.waitReceived(time.Hour, r), r, due.Truncate(time.Millisecond))
		}
		h.drain()
		for _, r := range held {
			if n := len(h.receivedOf(r.Value)); n != 1 {
				t.Errorf("%s released %d times, want once", r.Value, n)
			}
		}
	})
}
