package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hookpipe/hookpipe/runtime/dlq"
)

// redriveReason is the reason of every redrive marker.
const redriveReason = "redriven by webhookctl"

// redriveSummary is what dlq redrive did, or with --dry-run would do; it
// is the JSON shape of its output.
type redriveSummary struct {
	DryRun bool `json:"dry_run"`
	// ToRedrive counts the matching dead letters that can be sent back (a
	// delivery, or an event its schema refused) and were not redriven
	// before.
	ToRedrive int `json:"to_redrive"`
	// Redriven counts those sent back (0 with --dry-run).
	Redriven int `json:"redriven"`
	// AlreadyRedriven counts matching dead letters skipped because a
	// redrive marker points at them.
	AlreadyRedriven int `json:"already_redriven"`
	// Expunged counts matching dead letters skipped because their event
	// was expunged (checked when ClickHouse is configured).
	Expunged int `json:"expunged"`
	// Undecodable counts matching dead letters skipped because they hold
	// neither a delivery nor an event a schema refused (an event or record
	// that could not be decoded).
	Undecodable int `json:"undecodable"`
	// DeadLetters are the ones to redrive, oldest first; redriven is true
	// for those sent back.
	DeadLetters []*deadLetter `json:"dead_letters"`
}

func redriveCmd(fs *flag.FlagSet) runFunc {
	var f dlqFilter
	f.define(fs)
	var chf clickhouseFlags
	chf.define(fs)
	perSecond := defineRate(fs, 50, "dead letters redriven")
	dryRun := fs.Bool("dry-run", false, "list what would be redriven; produce nothing")
	return func(ctx context.Context, c *cli, _ []string) error {
		p, err := newPace(*perSecond)
		if err != nil {
			return err
		}
		if err := f.resolve(time.Now()); err != nil {
			return err
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		var rd *dlq.Redriver
		if !*dryRun {
			// Before reading the dlq: see dlq.NewRedriver.
			if rd, err = dlq.NewRedriver(ctx, k.conn, k.names, redriveReason); err != nil {
				return err
			}
			defer rd.Close()
		}
		found, err := k.readDLQ(ctx, &f)
		if err != nil {
			return err
		}
		sum := redriveSummary{DryRun: *dryRun, DeadLetters: []*deadLetter{}}
		todo, already, undecodable := dlq.ToRedrive(found)
		ch, check, err := c.expungeCheck(ctx, &chf)
		if err != nil {
			return err
		}
		if check {
			defer ch.Close()
			if todo, sum.Expunged, err = dropExpunged(ctx, ch, todo); err != nil {
				return err
			}
		}
		sum.DeadLetters, sum.AlreadyRedriven, sum.Undecodable = append(sum.DeadLetters, todo...), already, undecodable
		sum.ToRedrive = len(sum.DeadLetters)
		if !*dryRun {
			if err := c.redrive(ctx, k, rd, p, sum.DeadLetters); err != nil {
				return err
			}
			sum.Redriven = sum.ToRedrive
		}
		return c.printRedrive(&sum)
	}
}

// redrive sends dls back in transactions of up to p.batch dead letters,
// paced by p.
func (c *cli) redrive(ctx context.Context, k *kafka, rd *dlq.Redriver, p *pace, dls []*deadLetter) error {
	var done atomic.Int64
	stop := c.progress(func() string { return fmt.Sprintf("redriven %d of %d", done.Load(), len(dls)) })
	defer stop()
	for batch := range slices.Chunk(dls, p.batch) {
		err := p.wait(ctx, len(batch))
		if err == nil {
			err = topicErr(k.names.Deliveries(), rd.Batch(ctx, batch))
		}
		if err != nil {
			return fmt.Errorf("redriven %d of %d, then: %w", done.Load(), len(dls), err)
		}
		done.Add(int64(len(batch)))
	}
	return nil
}

func (c *cli) printRedrive(s *redriveSummary) error {
	if c.output == outputJSON {
		return c.printJSON(s)
	}
	skipped := fmt.Sprintf("skipped already-redriven %d, skipped undecodable %d", s.AlreadyRedriven, s.Undecodable)
	if s.Expunged > 0 {
		skipped += fmt.Sprintf(", skipped expunged %d", s.Expunged)
	}
	if !s.DryRun {
		fmt.Fprintf(c.stdout, "redriven %d, %s\n", s.Redriven, skipped)
		return nil
	}
	if s.ToRedrive > 0 {
		if err := c.printDeadLetters(s.DeadLetters, false); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout)
	}
	fmt.Fprintf(c.stdout, "would redrive %d, %s (dry run: nothing produced)\n", s.ToRedrive, skipped)
	return nil
}
