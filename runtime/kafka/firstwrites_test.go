package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFirstWritesWaitsForThePartitions: Wait returns only once the
// producer has published the partitions of a topic first written, and
// does not wait again for a topic whose partitions it saw published.
func TestFirstWritesWaitsForThePartitions(t *testing.T) {
	c, _, adm := newCluster(t)
	if _, err := adm.CreateTopic(testCtx(t, 10*time.Second), 2, 1, nil, "first"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("first-writes")}, TransactionsV1()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	f := NewFirstWrites()

	// Noted, never produced: the producer has no partitions of the topic.
	f.Note(&kgo.Record{Topic: "first", Partition: 1})
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.Wait(short, cl); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait for a topic never produced to = %v, want the deadline", err)
	}

	ctx := testCtx(t, 30*time.Second)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: "first", Value: []byte("v")}
	f.Note(r)
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(ctx, cl); err != nil {
		t.Fatalf("Wait after the first write = %v", err)
	}
	if leader, _, _ := cl.PartitionLeader("first", r.Partition); leader < 0 {
		t.Fatalf("Wait returned before the producer published partition %d", r.Partition)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	// Published: noted again, it is not waited for, even with ctx done.
	done, stop := context.WithCancel(context.Background())
	stop()
	f.Note(&kgo.Record{Topic: "first", Partition: 1})
	if err := f.Wait(done, cl); err != nil {
		t.Fatalf("Wait for a topic already published = %v", err)
	}
}
