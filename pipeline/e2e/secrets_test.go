package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/hookpipe/hookpipe/deliverer"
	"github.com/hookpipe/hookpipe/dispatcher"
	"github.com/hookpipe/hookpipe/retrier"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// testSecretsKey is every env's WEBHOOKS_SECRETS_KEY (bytes 0..31).
const testSecretsKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// keys is the keyring of the env's WEBHOOKS_SECRETS_KEY, nil without one.
func (e *env) keys() *topics.Keyring {
	e.t.Helper()
	v := e.vars[config.EnvSecretsKey]
	if v == "" {
		return nil
	}
	k, err := topics.ParseKeyring(v)
	if err != nil {
		e.t.Fatal(err)
	}
	return k
}

// logCapture is a zap core writing every entry, at every level, as JSON
// into a buffer.
type logCapture struct{ testkit.Buffer }

func (c *logCapture) Sync() error { return nil }

func (c *logCapture) logger(t testing.TB) *zap.Logger {
	capture := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewDevelopmentEncoderConfig()), c, zapcore.DebugLevel)
	return zap.New(zapcore.NewTee(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Core(), capture))
}

// readAll reads every data record of the topics up to their current ends.
func (e *env) readAll(names ...string) []*kgo.Record {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The client learns of topics it never produced to on the first ask.
	var ends kadm.ListedOffsets
	wait(e.t, 10*time.Second, "the end offsets of "+strings.Join(names, ","), func() bool {
		var err error
		ends, err = kadm.NewClient(e.cl).ListEndOffsets(ctx, names...)
		return err == nil && ends.Error() == nil
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(names...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		// Transaction markers count towards the end offsets; aborted
		// records are read too (read uncommitted).
		kgo.KeepControlRecords())
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	next := map[string]map[int32]int64{}
	behind := func() bool {
		b := false
		ends.Each(func(o kadm.ListedOffset) { b = b || next[o.Topic][o.Partition] < o.Offset })
		return b
	}
	var recs []*kgo.Record
	for behind() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			e.t.Fatalf("reading %v: %v", names, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				recs = append(recs, r)
			}
			if next[r.Topic] == nil {
				next[r.Topic] = map[int32]int64{}
			}
			next[r.Topic][r.Partition] = r.Offset + 1
		})
	}
	return recs
}

// forms are the ways a secret or key could leak: as given, its base64
// part, its raw bytes, and their hex.
func forms(t testing.TB, secret string) []string {
	t.Helper()
	b64 := strings.TrimPrefix(secret, topics.SecretPrefix)
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return []string{secret, b64, b64[:16], string(raw), hex.EncodeToString(raw)}
}

// TestSecretsNeverLeak runs subscriptions through a success, a 500 then a
// retry, a 410 Gone (which republishes the subscription disabled), and a
// secret rotation with webhookctl, capturing every log line of every
// component at debug level. No signing secret, and not the secrets key,
// may appear in the logs, in any record the pipeline wrote (attempts, dlq,
// deliveries, retry tiers), or in what webhookctl get and list print; on
// the subscriptions topic the secrets are sealed.
func TestSecretsNeverLeak(t *testing.T) {
	ctl := filepath.Join(binaries(t), "webhookctl")
	e := newEnv(t)
	r := newReceiver(t)
	var logs logCapture
	log := logs.logger(t)

	type sub struct{ id, pattern string }
	subs := map[string]topics.Subscription{}
	for _, s := range []sub{{"ok", "ok.*"}, {"flaky", "flaky.*"}, {"gone", "gone.*"}, {"rot", "rot.*"}} {
		subs[s.id] = e.subscribe(topics.Subscription{ID: s.id, URL: r.url(s.id), EventTypes: []string{s.pattern},
			Enabled: true, RetrySchedule: []string{"1s", "1s"}})
		r.trust(subs[s.id])
	}
	r.answer(func(q request, _ http.ResponseWriter) int {
		switch {
		case q.Sub == "gone":
			return http.StatusGone
		case q.Sub == "flaky" && len(r.attempts(q.ID)) == 0:
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})

	dcfg, err := dispatcher.LoadConfig(e.getenv)
	if err != nil {
		t.Fatal(err)
	}
	wcfg, err := deliverer.LoadConfig(e.getenv)
	if err != nil {
		t.Fatal(err)
	}
	rcfg, err := retrier.LoadConfig(e.getenv)
	if err != nil {
		t.Fatal(err)
	}
	stops := []func(){
		e.run("dispatcher", func(ctx context.Context) error { return dispatcher.Run(ctx, dcfg, log.Named("d")) }),
		e.run("deliverer", func(ctx context.Context) error { return deliverer.Run(ctx, wcfg, log.Named("w")) }),
		e.run("retrier", func(ctx context.Context) error { return retrier.Run(ctx, rcfg, log.Named("r")) }),
	}

	e.publish(
		topics.Event{ID: "evt_ok", Type: "ok.created", Data: json.RawMessage(`{}`)},
		topics.Event{ID: "evt_flaky", Type: "flaky.created", Data: json.RawMessage(`{}`)},
		topics.Event{ID: "evt_gone", Type: "gone.created", Data: json.RawMessage(`{}`)},
		topics.Event{ID: "evt_rot1", Type: "rot.created", Data: json.RawMessage(`{}`)},
	)
	wait(t, 60*time.Second, "ok, flaky (after a 500) and rot delivered", func() bool {
		p := r.pairs()
		return p["ok/evt_ok"] == 1 && p["flaky/evt_flaky"] == 1 && p["rot/evt_rot1"] == 1
	})
	if n := len(r.attempts("evt_flaky")); n != 2 {
		t.Errorf("flaky got %d requests, want a 500 then a success", n)
	}
	wait(t, 60*time.Second, "gone disabled after its 410", func() bool {
		for _, rec := range e.readAll(e.names.Subscriptions()) {
			if string(rec.Key) == "gone" {
				if s, err := topics.DecodeSubscriptionWith(rec.Value, e.keys()); err == nil && !s.Enabled {
					return true
				}
			}
		}
		return false
	})

	run := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(ctl, args...)
		cmd.Env = e.environ()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("webhookctl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	out, _ := run("-o", "json", "subscriptions", "rotate-secret", "rot")
	var rotated topics.Subscription
	if err := json.Unmarshal([]byte(out), &rotated); err != nil || !strings.HasPrefix(rotated.Secret, topics.SecretPrefix) {
		t.Fatalf("rotate-secret printed %q (%v)", out, err)
	}
	r.trust(rotated)
	e.publish(topics.Event{ID: "evt_rot2", Type: "rot.created", Data: json.RawMessage(`{}`)})
	wait(t, 60*time.Second, "rot delivered after the rotation", func() bool { return r.pairs()["rot/evt_rot2"] == 1 })
	for _, q := range r.got() {
		if q.ID == "evt_rot2" && len(strings.Fields(q.Header.Get("webhook-signature"))) != 2 {
			t.Errorf("after rotation webhook-signature = %q, want both secrets signing", q.Header.Get("webhook-signature"))
		}
	}
	r.checkSignatures(t)

	var printed strings.Builder
	for _, args := range [][]string{
		{"subscriptions", "get", "rot"}, {"subscriptions", "list"}, {"subscriptions", "get", "gone"},
		{"-o", "json", "subscriptions", "get", "rot"}, {"-o", "json", "subscriptions", "list"},
	} {
		stdout, stderr := run(args...)
		printed.WriteString(stdout + stderr)
	}
	if !strings.Contains(printed.String(), "flaky") || !strings.Contains(printed.String(), "410 Gone") {
		t.Fatalf("webhookctl get/list printed\n%s\nwant every subscription", printed.String())
	}

	for _, stop := range stops {
		stop()
	}
	logged := logs.String()
	for _, want := range []string{"disabling subscription", "delivered", "retrying"} {
		if !strings.Contains(logged, want) {
			t.Fatalf("the capture has no %q line: it does not see the components' logs", want)
		}
	}

	var secrets []string
	for _, s := range subs {
		secrets = append(secrets, s.Secret)
	}
	secrets = append(secrets, rotated.Secret)
	var leaks []string
	check := func(where, text string) {
		for _, secret := range secrets {
			for _, f := range forms(t, secret) {
				if strings.Contains(text, f) {
					leaks = append(leaks, where+" holds secret "+secret[:10]+"…")
				}
			}
		}
		for _, f := range forms(t, topics.SecretPrefix+testSecretsKey) {
			if strings.Contains(text, f) {
				leaks = append(leaks, where+" holds the secrets key")
			}
		}
	}
	check("the logs", logged)
	check("webhookctl get/list", printed.String())
	recordTopics := append([]string{e.names.Attempts(), e.names.DLQ(), e.names.Deliveries(), e.names.Subscriptions()},
		e.names.RetryTopics()...)
	seen := map[string]int{}
	for _, rec := range e.readAll(recordTopics...) {
		seen[rec.Topic]++
		check(rec.Topic+" record", string(rec.Key)+string(rec.Value))
		for _, h := range rec.Headers {
			check(rec.Topic+" header "+h.Key, string(h.Value))
		}
	}
	for _, topic := range []string{e.names.Attempts(), e.names.DLQ(), e.names.Subscriptions(), e.names.Retry(time.Second)} {
		if seen[topic] == 0 {
			t.Errorf("nothing on %s: the run did not exercise it", topic)
		}
	}
	if len(leaks) > 0 {
		t.Fatalf("secrets leaked:\n%s", strings.Join(leaks, "\n"))
	}
}
