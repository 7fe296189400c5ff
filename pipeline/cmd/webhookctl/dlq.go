package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	flag "github.com/spf13/pflag"

	"github.com/hookpipe/hookpipe/runtime/dlq"
	"github.com/hookpipe/hookpipe/topics"
)

// dlqFilter selects dead letters; dlq list and dlq redrive share it.
type dlqFilter struct {
	subscription string
	typ          string
	category     string
	times        timeRange
	since, until time.Time // resolved from times
}

func (f *dlqFilter) define(fs *flag.FlagSet) {
	fs.StringVar(&f.subscription, "subscription", "", "only dead letters of this subscription")
	fs.StringVar(&f.typ, "type", "", "only dead letters of this event type: a type, prefix.* or *")
	fs.StringVar(&f.category, "category", "", "only this failure category (server_error, timeout, permanent_4xx, exhausted, invalid_record, ...); an exhausted dead letter also matches its last failure's")
	f.times.define(fs, "dead letters that died")
}

// resolve checks the flags and resolves the time range against now.
func (f *dlqFilter) resolve(now time.Time) error {
	if f.typ != "" && topics.ValidatePattern(f.typ) != nil {
		return usagef("--type %q: want a type, prefix.* or *", f.typ)
	}
	var err error
	f.since, f.until, err = f.times.resolve(now)
	return err
}

// filter is the shared form of f.
func (f *dlqFilter) filter() *dlq.Filter {
	return &dlq.Filter{Subscription: f.subscription, Type: f.typ, Category: f.category, Since: f.since, Until: f.until}
}

// deadLetter is one dead letter found on the dlq topic; it is also the JSON
// shape of dlq list.
type deadLetter = dlq.Entry

// readDLQ reads the dead letters that pass f (dlq.Read).
func (k *kafka) readDLQ(ctx context.Context, f *dlqFilter) ([]*deadLetter, error) {
	found, err := dlq.Read(ctx, k.opts, k.adm, k.names, f.filter())
	return found, topicErr(k.names.DLQ(), err)
}

func dlqListCmd(fs *flag.FlagSet) runFunc {
	var f dlqFilter
	f.define(fs)
	limit := fs.Int("limit", 100, "show the newest N matching dead letters; 0 shows all")
	all := fs.Bool("all", false, "also show dead letters already redriven (REDRIVEN column)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *limit < 0 {
			return usagef("--limit %d: must not be negative", *limit)
		}
		if err := f.resolve(time.Now()); err != nil {
			return err
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		found, err := k.readDLQ(ctx, &f)
		if err != nil {
			return err
		}
		shown := []*deadLetter{}
		for _, e := range found {
			if *all || !e.Redriven {
				shown = append(shown, e)
			}
		}
		matched := len(shown)
		if *limit > 0 && matched > *limit {
			shown = shown[matched-*limit:]
		}
		if c.output == outputJSON {
			return c.printJSON(shown)
		}
		if matched == 0 {
			fmt.Fprintln(c.stdout, "no dead letters")
			return nil
		}
		if err := c.printDeadLetters(shown, *all); err != nil {
			return err
		}
		if len(shown) < matched {
			fmt.Fprintf(c.stdout, "\nshowing the newest %d of %d matching dead letters (--limit 0 shows all)\n", len(shown), matched)
		}
		return nil
	}
}

// printDeadLetters prints a table of dead letters, one line each, without
// their event data.
func (c *cli) printDeadLetters(dls []*deadLetter, redrivenColumn bool) error {
	tw := newTable(c.stdout)
	header := "DEAD AT\tPARTITION\tOFFSET\tSUBSCRIPTION\tEVENT\tTYPE\tCATEGORY\tSTATUS\tATTEMPTS\t"
	if redrivenColumn {
		header += "REDRIVEN\t"
	}
	fmt.Fprintln(tw, header+"REASON")
	for _, e := range dls {
		dl := &e.DeadLetter
		var sub, event, typ string
		if d := dl.Delivery; d != nil {
			sub, event, typ = d.SubscriptionID, d.EventID, d.EventType
		} else if ev, ok := dl.Event(); ok {
			event, typ = ev.ID, ev.Type
		}
		status := "-"
		if dl.HTTPStatus != 0 {
			status = strconv.Itoa(dl.HTTPStatus)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t", formatTime(dl.DeadAt), e.Partition, e.Offset,
			orDash(sub), orDash(event), orDash(typ), orDash(dl.FailureCategory), status, dl.Attempts)
		if redrivenColumn {
			fmt.Fprintf(tw, "%s\t", yesNo(e.Redriven))
		}
		fmt.Fprintln(tw, orDash(oneLine(dl.Reason, 60)))
	}
	return tw.Flush()
}

// oneLine collapses s's whitespace (tabs and newlines included) and cuts it
// to at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
