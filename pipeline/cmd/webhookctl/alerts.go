package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	flag "github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/api/alert"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

func alertChannelsAddCmd(fs *flag.FlagSet) runFunc {
	kind := fs.String("kind", "", "email, slack (a Slack-compatible incoming webhook) or webhook (POST of the digest as JSON)")
	to := fs.StringArray("to", nil, "a recipient of an email channel; repeatable")
	url := fs.String("url", "", "where a slack or webhook channel POSTs")
	tenant := fs.String("tenant", "", "whose operational events the channel hears of; empty: the operators' channel, hearing of every tenant")
	types := fs.StringSlice("types", nil, "operational event types heard of, comma-separated (default: all)")
	digest := fs.Duration("digest", topics.DefaultDigestWindow, "the digest window: the notices of a window make one message")
	id := fs.String("id", "", "the channel's id (default: a new one)")
	return func(ctx context.Context, c *cli, _ []string) error {
		now := time.Now().UTC()
		ch := topics.AlertChannel{ID: *id, Tenant: *tenant, Kind: *kind, To: *to, URL: *url, Types: *types,
			DigestMS: digest.Milliseconds(), CreatedAt: now, UpdatedAt: now}
		if ch.ID == "" {
			ch.ID = topics.NewID("ach_")
		}
		if err := ch.Validate(); err != nil {
			return usagef("%v", err)
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		if k.keysErr != nil {
			return k.keysErr
		}
		if _, err := k.produce(ctx, &kgo.Record{Topic: k.names.AlertChannels(), Key: []byte(ch.ID), Value: ch.EncodeWith(k.keys)}); err != nil {
			return err
		}
		return c.printAlertChannels([]*topics.AlertChannel{&ch})
	}
}

func alertChannelsUpdateCmd(fs *flag.FlagSet) runFunc {
	kind := fs.String("kind", "", "email, slack or webhook; a new kind drops what it has no use for (a URL, recipients)")
	to := fs.StringArray("to", nil, "a recipient of an email channel; repeatable, replaces them all")
	url := fs.String("url", "", "where a slack or webhook channel POSTs")
	types := fs.StringSlice("types", nil, "operational event types heard of, comma-separated (replaces them; empty: all)")
	digest := fs.Duration("digest", topics.DefaultDigestWindow, "the digest window")
	return func(ctx context.Context, c *cli, args []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		cur, err := k.alertChannel(ctx, args[0])
		if err != nil {
			return err
		}
		// What is not given stays; with nothing given, the channel is
		// written again as it is (under the first WEBHOOKS_SECRETS_KEY).
		ch := *cur
		if fs.Changed("kind") {
			ch.SetKind(*kind)
		}
		if fs.Changed("to") {
			ch.To = *to
		}
		if fs.Changed("url") {
			ch.URL = *url
		}
		if fs.Changed("types") {
			ch.Types = *types
		}
		if fs.Changed("digest") {
			ch.DigestMS = digest.Milliseconds()
		}
		ch.UpdatedAt = time.Now().UTC()
		if err := ch.Validate(); err != nil {
			return usagef("%v", err)
		}
		if _, err := k.produce(ctx, &kgo.Record{Topic: k.names.AlertChannels(), Key: []byte(ch.ID), Value: ch.EncodeWith(k.keys)}); err != nil {
			return err
		}
		return c.printAlertChannels([]*topics.AlertChannel{&ch})
	}
}

func alertChannelsListCmd(fs *flag.FlagSet) runFunc {
	tenant := fs.String("tenant", "", "only this tenant's channels")
	return func(ctx context.Context, c *cli, _ []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		t, err := k.alertChannels(ctx)
		if err != nil {
			return err
		}
		var out []*topics.AlertChannel
		for _, ch := range t.All() {
			if *tenant == "" || ch.Tenant == *tenant {
				out = append(out, ch)
			}
		}
		return c.printAlertChannels(out)
	}
}

var alertChannelsDeleteCmd = deleteCmdOf((*kafka).alertChannel, topics.Names.AlertChannels, "alert channel", "id")

func alertChannelsTestCmd(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		var cfg alert.Config
		if err := config.Parse(c.getenv, &cfg); err != nil {
			return usagef("%v", err)
		}
		if err := cfg.Validate(); err != nil {
			return usagef("%v", err)
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		ch, err := k.alertChannel(ctx, args[0])
		if err != nil {
			return err
		}
		s, err := alert.NewSender(cfg, &http.Client{})
		if err != nil {
			return usagef("%v", err)
		}
		if err := s.Send(ctx, ch, alert.TestDigest(ch, time.Now())); err != nil {
			return fmt.Errorf("alert channel %s: test message not sent: %w", ch.ID, err)
		}
		if c.output == outputJSON {
			return c.printJSON(struct {
				ID   string `json:"id"`
				Sent bool   `json:"sent"`
			}{ch.ID, true})
		}
		fmt.Fprintf(c.stdout, "sent a test message to alert channel %s\n", ch.ID)
		return nil
	}
}

// printAlertChannels shows channels, their URLs masked: JSON, or a table.
func (c *cli) printAlertChannels(chs []*topics.AlertChannel) error {
	masked := make([]topics.AlertChannel, len(chs))
	for i, ch := range chs {
		masked[i] = *ch
		masked[i].URL = ch.MaskedURL()
	}
	if c.output == outputJSON {
		return c.printJSON(masked)
	}
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "ID\tTENANT\tKIND\tTO\tTYPES\tDIGEST\tUPDATED")
	for _, ch := range masked {
		tenant, types, target := ch.Tenant, "all", ch.URL
		if tenant == "" {
			tenant = "(operators)"
		}
		if len(ch.Types) > 0 {
			types = strings.Join(ch.Types, ",")
		}
		if ch.Kind == topics.AlertEmail {
			target = strings.Join(ch.To, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ch.ID, tenant, ch.Kind, target, types, ch.Digest(), formatTime(ch.UpdatedAt))
	}
	return tw.Flush()
}

// alertChannels reads the alert-channels topic up to its current end,
// opening sealed URLs with WEBHOOKS_SECRETS_KEY.
func (k *kafka) alertChannels(ctx context.Context) (*table.AlertTable, error) {
	if k.keysErr != nil {
		return nil, k.keysErr
	}
	topic := k.names.AlertChannels()
	t, err := table.NewAlertTable(k.opts, topic, k.keys, zap.NewNop())
	if err != nil {
		return nil, err
	}
	return t, readToEnd(ctx, topic, t)
}

// alertChannel reads one channel; an error when there is none.
func (k *kafka) alertChannel(ctx context.Context, id string) (*topics.AlertChannel, error) {
	return entry(ctx, k.alertChannels, "alert channel", id)
}
