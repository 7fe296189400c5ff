package send

import (
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// TestConnsKeys: a destination's connection is found again by its
// address, a destination that differs in a field (a new password) gets a
// connection of its own, and the memo of keys stays bounded.
func TestConnsKeys(t *testing.T) {
	opened := 0
	cs := newConns(func(int) {}, nil)
	open := func() (int, error) { opened++; return opened, nil }
	d := &topics.Destination{Type: topics.DestinationNATS, URL: "nats://127.0.0.1:4222", Subject: "hooks", Password: "a"}
	first, _ := cs.get(d, open)
	again, _ := cs.get(d, open)
	same := *d
	copied, _ := cs.get(&same, open)
	changed := same
	changed.Password = "b"
	other, _ := cs.get(&changed, open)
	if first != again || first != copied || other == first || opened != 2 {
		t.Errorf("connections %d %d %d %d, %d opened; want the first three the same, the fourth new", first, again, copied, other, opened)
	}
	for range maxDestinationKeys + 10 {
		_, _ = cs.get(&topics.Destination{Type: topics.DestinationNATS, URL: d.URL, Subject: "hooks"}, open)
	}
	if n := len(cs.keys); n > maxDestinationKeys {
		t.Errorf("%d keys remembered, want at most %d", n, maxDestinationKeys)
	}
}
