package table

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// The Keyed tests keep strings: a value "bad" does not decode, and a
// header "suffix" is appended to the value it comes with.

func decodeString(r *kgo.Record) (string, error) {
	if string(r.Value) == "bad" {
		return "", errors.New("bad value")
	}
	v := string(r.Value)
	for _, h := range r.Headers {
		if h.Key == "suffix" {
			v += string(h.Value)
		}
	}
	return v, nil
}

// startKeyed runs a Keyed table of strings on e's topic until the end of
// the test.
func (e *tableEnv) startKeyed(tb testing.TB, with rules[string]) *Keyed[string] {
	tb.Helper()
	k, err := newKeyed([]kgo.Opt{kgo.SeedBrokers(e.c.ListenAddrs()...)}, e.topic, zap.NewNop(), with)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go k.Run(ctx)
	tb.Cleanup(func() { cancel(); k.Close() })
	return k
}

// putString writes key's value (nil: a tombstone) with headers as
// name, value pairs, and waits until k has applied it.
func (e *tableEnv) putString(tb testing.TB, k *Keyed[string], key string, value []byte, headers ...string) {
	tb.Helper()
	r := &kgo.Record{Topic: e.topic, Key: []byte(key), Value: value}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	r, err := e.cl.ProduceSync(testCtx(tb, 10*time.Second), r).First()
	if err != nil {
		tb.Fatal(err)
	}
	if err := k.WaitApplied(testCtx(tb, catchUpTimeout), r); err != nil {
		tb.Fatal(err)
	}
}

// contents renders a table as key=value pairs.
func contents(k *Keyed[string]) map[string]string {
	out := map[string]string{}
	for _, key := range []string{"a", "b", "c"} {
		if v, ok := k.Get(key); ok {
			out[key] = v
		}
	}
	return out
}

// TestKeyedInvalidRecords: a record that does not decode drops its key's
// value, or leaves it with keepInvalid; a record under a new key adds
// nothing either way.
func TestKeyedInvalidRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep bool
		want map[string]string
	}{
		{"dropped", false, map[string]string{}},
		{"kept", true, map[string]string{"a": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTableEnv(t, 1)
			k := e.startKeyed(t, rules[string]{decode: decodeString, keepInvalid: tc.keep})
			e.putString(t, k, "a", []byte("1"))
			e.putString(t, k, "a", []byte("bad"))
			e.putString(t, k, "b", []byte("bad"))
			if got := contents(k); !maps.Equal(got, tc.want) {
				t.Fatalf("table %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKeyedDecodesHeaders: decode sees the record's headers.
func TestKeyedDecodesHeaders(t *testing.T) {
	e := newTableEnv(t, 1)
	k := e.startKeyed(t, rules[string]{decode: decodeString})
	e.putString(t, k, "a", []byte("1"), "suffix", "+h")
	if v, _ := k.Get("a"); v != "1+h" {
		t.Fatalf("a = %q, want 1+h", v)
	}
}

// TestKeyedAdmit: a record admit refuses changes nothing, a value or a
// tombstone; admit is asked of each record in order, before it applies.
func TestKeyedAdmit(t *testing.T) {
	e := newTableEnv(t, 1)
	var asked []string
	admit := func(r *kgo.Record) bool {
		asked = append(asked, string(r.Key))
		for _, h := range r.Headers {
			if h.Key == "stale" {
				return false
			}
		}
		return true
	}
	k := e.startKeyed(t, rules[string]{decode: decodeString, admit: admit})
	e.putString(t, k, "a", []byte("1"))
	e.putString(t, k, "a", []byte("2"), "stale", "")
	e.putString(t, k, "a", nil, "stale", "")
	e.putString(t, k, "b", []byte("bad"), "stale", "")
	e.putString(t, k, "c", []byte("3"))
	if got, want := contents(k), map[string]string{"a": "1", "c": "3"}; !maps.Equal(got, want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if want := []string{"a", "a", "a", "b", "c"}; !slices.Equal(asked, want) {
		t.Fatalf("admit asked of %q, want %q", asked, want)
	}
}

// reverse is an index of the test values back to their keys.
type reverse map[string]string

func (x reverse) insert(key, v string) { x[v] = key }

func (x reverse) remove(_, v string) { delete(x, v) }

// TestKeyedIndexFollowsValues: an index is told of every value added,
// replaced, deleted or dropped as invalid, and of none kept.
func TestKeyedIndexFollowsValues(t *testing.T) {
	for _, keep := range []bool{false, true} {
		e := newTableEnv(t, 1)
		idx := reverse{}
		k := e.startKeyed(t, rules[string]{decode: decodeString, keepInvalid: keep, index: idx})
		e.putString(t, k, "a", []byte("1"))
		e.putString(t, k, "b", []byte("2"))
		e.putString(t, k, "c", []byte("5"))
		e.putString(t, k, "a", []byte("3"))
		e.putString(t, k, "b", nil)
		e.putString(t, k, "c", []byte("bad"))
		want := reverse{}
		for key, v := range contents(k) {
			want[v] = key
		}
		k.mu.RLock()
		if !maps.Equal(idx, want) {
			t.Errorf("keepInvalid %t: index %v, want %v", keep, idx, want)
		}
		k.mu.RUnlock()
	}
}

// TestKeyedWatch: the channel Watch returns is closed by the next change,
// and the values returned with the next one include it.
func TestKeyedWatch(t *testing.T) {
	e := newTableEnv(t, 1)
	k := e.startKeyed(t, rules[string]{decode: decodeString})
	e.putString(t, k, "b", []byte("2"))
	all, changed := k.Watch()
	if !slices.Equal(all, []string{"2"}) {
		t.Fatalf("Watch = %q, want [2]", all)
	}
	if waitDone(changed, 50*time.Millisecond) {
		t.Fatal("changed closed with no change")
	}
	e.putString(t, k, "a", []byte("1"))
	if !waitDone(changed, catchUpTimeout) {
		t.Fatal("changed not closed after a change")
	}
	all, changed = k.Watch()
	if !slices.Equal(all, []string{"1", "2"}) {
		t.Fatalf("Watch = %q, want [1 2], by key", all)
	}
	select {
	case <-changed:
		t.Fatal("Watch after the change returned a closed channel")
	default:
	}
	if k.Len() != 2 {
		t.Fatalf("Len = %d, want 2", k.Len())
	}
}
