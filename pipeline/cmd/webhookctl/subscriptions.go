package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/filter"
	"github.com/hookpipe/hookpipe/runtime/transform"
	"github.com/hookpipe/hookpipe/topics"
)

func createCmd(fs *flag.FlagSet) runFunc {
	var f subFlags
	f.define(fs, false)
	id := fs.String("id", "", "subscription id (default: sub_ + 20 random lowercase letters and digits)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if (f.url == "") == (f.dest == "" || f.dest == topics.DestinationHTTP) {
			return usagef("one of --url and --destination is required")
		}
		if f.events == "" {
			return usagef("--events is required")
		}
		if f.url != "" {
			if err := c.checkURL(f.url); err != nil {
				return err
			}
		}
		now := time.Now().UTC()
		s := topics.Subscription{ID: *id, CreatedAt: now, UpdatedAt: now}
		if s.ID == "" {
			s.ID = topics.NewID("sub_")
		}
		if err := f.apply(&s, func(string) bool { return true }); err != nil {
			return err
		}
		if s.Secret == "" {
			secret, err := topics.NewSecret()
			if err != nil {
				return fmt.Errorf("generate secret: %w", err)
			}
			s.Secret = secret
		}
		if err := filter.Validate(&s); err != nil {
			return err
		}
		if err := transform.Validate(&s); err != nil {
			return err
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		t, err := k.subscriptions(ctx)
		if err != nil {
			return err
		}
		if _, ok := t.Get(s.ID); ok {
			return fmt.Errorf("subscription %s already exists", s.ID)
		}
		if err := c.room(ctx, k, t, &s); err != nil {
			return err
		}
		if err := k.putSubscription(ctx, &s); err != nil {
			return err
		}
		c.warnSpread(ctx, k, &s)
		return c.printSubscription(&s, true)
	}
}

func listCmd(fs *flag.FlagSet) runFunc {
	tenant := fs.String("tenant", "", "only this tenant's subscriptions")
	return func(ctx context.Context, c *cli, _ []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		t, err := k.subscriptions(ctx)
		if err != nil {
			return err
		}
		subs := []topics.Subscription{}
		for _, s := range t.All() {
			if *tenant == "" || s.Tenant == *tenant {
				subs = append(subs, masked(s))
			}
		}
		slices.SortFunc(subs, func(a, b topics.Subscription) int { return strings.Compare(a.ID, b.ID) })
		if c.output == outputJSON {
			return c.printJSON(subs)
		}
		if len(subs) == 0 {
			fmt.Fprintln(c.stdout, "no subscriptions")
			return nil
		}
		tw := newTable(c.stdout)
		fmt.Fprintln(tw, "ID\tTENANT\tENABLED\tEVENTS\tURL")
		for _, s := range subs {
			fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\n", s.ID, orDash(s.Tenant), s.Enabled, strings.Join(s.EventTypes, ","), s.URL)
		}
		return tw.Flush()
	}
}

func getCmd(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		s, err := k.subscription(ctx, args[0])
		if err != nil {
			return err
		}
		c.breaker = c.readBreaker(ctx, s.ID)
		return c.printSubscription(s, false)
	}
}

func updateCmd(fs *flag.FlagSet) runFunc {
	var f subFlags
	f.define(fs, true)
	return func(ctx context.Context, c *cli, args []string) error {
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(subFlagNames, fl.Name) {
				set[fl.Name] = true
			}
		})
		if len(set) == 0 {
			return usagef("nothing to update: give at least one of --%s", strings.Join(subFlagNames, ", --"))
		}
		if set["url"] {
			if err := c.checkURL(f.url); err != nil {
				return err
			}
		}
		var was topics.Subscription
		s, err := c.change(ctx, args[0], func(s *topics.Subscription, _ time.Time) error {
			was = *s
			return f.apply(s, func(name string) bool { return set[name] })
		})
		if err != nil {
			return err
		}
		if s.Width() != was.Width() && s.Ordering == topics.OrderingKey {
			fmt.Fprintf(c.stderr, "webhookctl: warning: %s is ordered and now spreads over %d partitions, not %d: "+
				"a key's deliveries already queued, retried or held may be overtaken by its next ones (ADR 0020)\n",
				s.ID, s.Width(), was.Width())
		}
		if set["partitions"] {
			if k, err := c.connect(ctx); err == nil {
				c.warnSpread(ctx, k, s)
				k.close()
			}
		}
		return c.printSubscription(s, false)
	}
}

func enableCmd(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		s, err := c.change(ctx, args[0], func(s *topics.Subscription, _ time.Time) error {
			s.Enabled = true
			s.DisabledReason = ""
			return nil
		})
		if err != nil {
			return err
		}
		return c.printSubscription(s, false)
	}
}

func disableCmd(fs *flag.FlagSet) runFunc {
	reason := fs.String("reason", "", "why, kept in disabled_reason")
	return func(ctx context.Context, c *cli, args []string) error {
		reasonGiven := false
		fs.Visit(func(fl *flag.Flag) { reasonGiven = reasonGiven || fl.Name == "reason" })
		s, err := c.change(ctx, args[0], func(s *topics.Subscription, _ time.Time) error {
			// Disabling again without --reason keeps the recorded reason.
			if s.Enabled || reasonGiven {
				s.DisabledReason = *reason
			}
			s.Enabled = false
			return nil
		})
		if err != nil {
			return err
		}
		return c.printSubscription(s, false)
	}
}

var deleteCmd = deleteCmdOf((*kafka).subscription, topics.Names.Subscriptions, "subscription", "id")

func rotateCmd(fs *flag.FlagSet) runFunc {
	given := fs.String("secret", "", "the new secret, whsec_ + base64 of 24-64 bytes (default: generated)")
	return func(ctx context.Context, c *cli, args []string) error {
		secret := *given
		if secret == "" {
			var err error
			if secret, err = topics.NewSecret(); err != nil {
				return fmt.Errorf("generate secret: %w", err)
			}
		} else if err := topics.ValidateSecret(secret); err != nil {
			return err
		}
		s, err := c.change(ctx, args[0], func(s *topics.Subscription, now time.Time) error {
			if s.Secret == secret {
				return usagef("--secret is the current secret")
			}
			s.PreviousSecret = s.Secret
			s.PreviousSecretUntil = now.Add(topics.RotationGrace)
			s.Secret = secret
			return nil
		})
		if err != nil {
			return err
		}
		return c.printSubscription(s, true)
	}
}

// change applies fn to the stored subscription id, validates the result and
// writes it.
func (c *cli) change(ctx context.Context, id string, fn func(s *topics.Subscription, now time.Time) error) (*topics.Subscription, error) {
	k, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer k.close()
	t, err := k.subscriptions(ctx)
	if err != nil {
		return nil, err
	}
	cur, ok := t.Get(id)
	if !ok {
		return nil, notFound(id)
	}
	// fn assigns fields, it never modifies cur's slices or map in place.
	s := *cur
	now := time.Now().UTC()
	if err := fn(&s, now); err != nil {
		return nil, err
	}
	s.UpdatedAt = now
	if err := filter.Validate(&s); err != nil {
		return nil, err
	}
	if err := transform.Validate(&s); err != nil {
		return nil, err
	}
	if s.Tenant != cur.Tenant {
		if err := c.room(ctx, k, t, &s); err != nil {
			return nil, err
		}
	}
	if err := k.putSubscription(ctx, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// putSubscription writes s keyed by its id and waits for the broker's ack.
// Secrets are sealed with WEBHOOKS_SECRETS_KEY (plaintext only in dev mode).
func (k *kafka) putSubscription(ctx context.Context, s *topics.Subscription) error {
	if k.keysErr != nil {
		return k.keysErr
	}
	_, err := k.produce(ctx, &kgo.Record{Topic: k.names.Subscriptions(), Key: []byte(s.ID), Value: s.EncodeWith(k.keys)})
	return err
}

// warnSpread warns when a deliveries topic has fewer partitions than s
// spreads over: its shards then share partitions, and the deliverer owning
// one runs them with their shares of the cap, no more.
func (c *cli) warnSpread(ctx context.Context, k *kafka, s *topics.Subscription) {
	if s.Width() == 1 {
		return
	}
	details, err := k.adm.ListTopics(ctx, k.names.DeliveryTopics()...)
	if err != nil {
		return // the subscription is written; the warning is a courtesy
	}
	for _, t := range details.Sorted() {
		if t.Err == nil && len(t.Partitions) < s.Width() {
			fmt.Fprintf(c.stderr, "webhookctl: warning: %s has %d partitions, fewer than the %d %s spreads over: "+
				"at most %d deliverers carry it\n", t.Topic, len(t.Partitions), s.Width(), s.ID, len(t.Partitions))
		}
	}
}

func notFound(id string) error { return fmt.Errorf("subscription %s not found", id) }
