package queuetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS returns the shared test nats-server's URL (WEBHOOKS_TEST_NATS_URL).
// It skips tb when the variable is unset (fails it when services are
// required).
func NATS(tb testing.TB) string {
	tb.Helper()
	return shared(tb, EnvNATSURL, NATSServer, 14222, "a real nats-server with JetStream")
}

// Stream is a JetStream stream of one test's own, capturing the subject
// Subject and every subject under it (Subject.>).
type Stream struct {
	Name    string
	Subject string
	// NC and JS are the helper's own connection; the code under test
	// brings its own.
	NC *nats.Conn
	JS jetstream.JetStream
}

// NewStream connects to the nats-server at url and creates a stream
// (file storage, one replica) on a subject of its own; both are deleted
// when the test ends.
func NewStream(tb testing.TB, url string) *Stream {
	tb.Helper()
	nc, err := nats.Connect(url, nats.Name("queuetest"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		tb.Fatalf("nats connect: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		tb.Fatal(err)
	}
	name := uniqueName("test_")
	s := &Stream{Name: name, Subject: "test." + name[len("test_"):], NC: nc, JS: js}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     s.Name,
		Subjects: []string{s.Subject, s.Subject + ".>"},
		Storage:  jetstream.FileStorage,
		Replicas: 1,
	}); err != nil {
		nc.Close()
		tb.Fatalf("create stream %s: %v", s.Name, err)
	}
	tb.Cleanup(func() {
		// Best effort: the test may have stopped its server.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, s.Name)
		nc.Close()
	})
	return s
}

// Count is how many messages the stream holds.
func (s *Stream) Count(tb testing.TB) uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.JS.Stream(ctx, s.Name)
	if err != nil {
		tb.Fatalf("stream %s: %v", s.Name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		tb.Fatalf("stream %s info: %v", s.Name, err)
	}
	return info.State.Msgs
}

// Read waits up to timeout until the stream holds n messages and returns
// them in stream order (sequences 1 to n; the stream is never purged).
// It fails tb when fewer arrive.
func (s *Stream) Read(tb testing.TB, n int, timeout time.Duration) []*jetstream.RawStreamMsg {
	tb.Helper()
	testkit.WaitFor(tb, timeout, "messages in stream "+s.Name, func() bool { return s.Count(tb) >= uint64(n) })
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, err := s.JS.Stream(ctx, s.Name)
	if err != nil {
		tb.Fatalf("stream %s: %v", s.Name, err)
	}
	msgs := make([]*jetstream.RawStreamMsg, 0, n)
	for seq := uint64(1); len(msgs) < n; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			tb.Fatalf("stream %s message %d: %v", s.Name, seq, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// PublishNATS publishes n messages (msg(i), i from 0) to subject through
// js, one Publish each (a message's id as its Nats-Msg-Id), with up to inflight unacknowledged (1: each
// acknowledged before the next is sent; more: asynchronously, a window of
// inflight acknowledgements). It returns the first error, after which it
// sends no more.
func PublishNATS(ctx context.Context, js jetstream.JetStream, subject string, n, inflight int, msg func(int) Msg) error {
	if inflight <= 1 {
		for i := range n {
			m, opts := natsMsg(subject, msg(i))
			if _, err := js.PublishMsg(ctx, m, opts...); err != nil {
				return err
			}
		}
		return nil
	}
	window := make([]jetstream.PubAckFuture, 0, inflight)
	wait := func(f jetstream.PubAckFuture) error {
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range n {
		if len(window) == inflight {
			if err := wait(window[0]); err != nil {
				return err
			}
			window = window[1:]
		}
		m, opts := natsMsg(subject, msg(i))
		f, err := js.PublishMsgAsync(m, opts...)
		if err != nil {
			return err
		}
		window = append(window, f)
	}
	var errs []error
	for _, f := range window {
		errs = append(errs, wait(f))
	}
	return errors.Join(errs...)
}

// natsMsg is m as a message to subject, with the options of its publish.
func natsMsg(subject string, m Msg) (*nats.Msg, []jetstream.PublishOpt) {
	nm := &nats.Msg{Subject: subject, Data: m.Body}
	if len(m.Header) > 0 {
		nm.Header = make(nats.Header, len(m.Header)+1)
		for _, h := range m.Header {
			nm.Header.Add(h.Name, h.Value)
		}
	}
	if m.ID == "" {
		return nm, nil
	}
	return nm, []jetstream.PublishOpt{jetstream.WithMsgID(m.ID)}
}
