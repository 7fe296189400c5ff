package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestAlerterCommitsAfterSending: the alerter sends a channel one digest
// for the notices of a window, and commits them once sent: a replica
// that takes over sends only the notices that came after.
func TestAlerterCommitsAfterSending(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	names := topics.Names{Prefix: topics.DefaultPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if _, err := kafka.Ensure(testkit.Ctx(t, 10*time.Second), kadm.NewClient(cl), names, kafka.Layout{Partitions: 1, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	publish := func(from, n int) {
		for i := from; i < from+n; i++ {
			ev := topics.NoticeEvent(fmt.Sprintf("ntf_%d", i), topics.NoticeMessageDead,
				&topics.Subscription{ID: "sub_1", Tenant: "acme", URL: "https://a.example/"}, topics.Notice{EventID: fmt.Sprintf("evt_%d", i), At: t0})
			b, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: names.Notices(), Key: []byte("sub_1"), Value: b}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var (
		mu   sync.Mutex
		sent []*Digest
	)
	chans := fakeChannels{{ID: "ach_1", Tenant: "acme", Kind: topics.AlertWebhook, URL: "https://a.example/alerts", DigestMS: 1000}}
	run := func() (stop func()) {
		a, err := New(Config{Group: "alerter-test"}, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, names, chans, &Sender{},
			prometheus.NewRegistry(), testkit.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		a.send = func(_ context.Context, _ *topics.AlertChannel, d *Digest) error {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, d)
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); a.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	digests := func() []*Digest {
		mu.Lock()
		defer mu.Unlock()
		return append([]*Digest(nil), sent...)
	}

	publish(0, 50)
	stop := run()
	testkit.WaitFor(t, 30*time.Second, "the first digest", func() bool { return len(digests()) >= 1 })
	// The digest's commit is marked once sent; wait for it to reach
	// the group before the replica stops.
	adm := kadm.NewClient(cl)
	testkit.WaitFor(t, 30*time.Second, "the commit", func() bool {
		offs, err := adm.FetchOffsets(t.Context(), "alerter-test")
		if err != nil {
			return false
		}
		o, ok := offs.Lookup(names.Notices(), 0)
		return ok && o.At == 50
	})
	stop()
	if d := digests(); len(d) != 1 || d[0].Total != 50 {
		t.Fatalf("digests %+v, want one of 50 notices", d)
	}

	stop = run()
	defer stop()
	publish(50, 3)
	testkit.WaitFor(t, 30*time.Second, "the second digest", func() bool { return len(digests()) >= 2 })
	if d := digests(); len(d) != 2 || d[1].Total != 3 || d[1].Notices[0].Data.EventID != "evt_50" {
		t.Fatalf("the replica taking over sent %+v, want the 3 new notices only", d[1])
	}
}
