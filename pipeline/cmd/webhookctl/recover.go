package main

import (
	"context"
	"fmt"
	"time"

	flag "github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// recoverCmd starts a recover operation: the API replica that runs the
// bulk operations carries it out (it reads the attempts in ClickHouse and
// sends each failed event once, resuming after a restart), as
// POST /v1/subscriptions/{id}/recover does.
func recoverCmd(fs *flag.FlagSet) runFunc {
	var times timeRange
	times.define(fs, "attempts made")
	fs.Lookup("since").Usage += " (required)"
	perSecond := fs.Float64("rate", 100, "deliveries per second at most")
	return func(ctx context.Context, c *cli, args []string) error {
		if times.since == "" {
			return usagef("--since is required")
		}
		if !(*perSecond > 0) || *perSecond > 10000 {
			return usagef("--rate %v: want more than 0 and at most 10000", *perSecond)
		}
		now := time.Now().UTC()
		since, until, err := times.resolve(now)
		if err != nil {
			return err
		}
		if until.IsZero() || until.After(now) {
			until = now
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		sub, err := k.enabledSubscription(ctx, args[0])
		if err != nil {
			return err
		}
		o := topics.Operation{ID: topics.NewID("op_"), Kind: topics.OperationRecover, Subscription: sub.ID, Since: since.UTC(),
			Until: until.UTC(), Rate: *perSecond, State: topics.OperationPending, CreatedAt: now, UpdatedAt: now}
		if _, err := k.produce(ctx, &kgo.Record{Topic: k.names.Operations(), Key: []byte(o.ID), Value: o.Encode()}); err != nil {
			return err
		}
		if c.output == outputJSON {
			return c.printJSON(o)
		}
		fmt.Fprintf(c.stdout, "recover %s started: the API replica running operations carries it out; follow it with GET /v1/operations/%s\n", o.ID, o.ID)
		return nil
	}
}
