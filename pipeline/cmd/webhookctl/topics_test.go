package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestTopicsEnsure(t *testing.T) {
	h := newHarness(t, false)
	type ensured struct {
		Created  []string `json:"created"`
		Existing []string `json:"existing"`
	}
	all := slices.Sorted(slices.Values(h.names.All()))

	var first ensured
	h.json(&first, "topics", "ensure", "--partitions", "3")
	if got := slices.Sorted(slices.Values(first.Created)); !slices.Equal(got, all) || len(first.Existing) != 0 {
		t.Fatalf("first ensure: created %v, existing %v; want created %v", first.Created, first.Existing, all)
	}

	var second ensured
	h.json(&second, "topics", "ensure", "--partitions", "3")
	if got := slices.Sorted(slices.Values(second.Existing)); !slices.Equal(got, all) || len(second.Created) != 0 {
		t.Fatalf("second ensure: created %v, existing %v; want existing %v", second.Created, second.Existing, all)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	details, err := kadm.NewClient(cl).ListTopics(ctx, all...)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range all {
		want := 3
		if topic == h.names.Subscriptions() || topic == h.names.Operations() || topic == h.names.EventTypes() || topic == h.names.Notices() {
			want = 1
		}
		if got := len(details[topic].Partitions); got != want {
			t.Errorf("%s has %d partitions, want %d", topic, got, want)
		}
	}
}
