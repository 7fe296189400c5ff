package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	flag "github.com/spf13/pflag"

	"github.com/twmb/franz-go/pkg/kgo"

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

// matches reports whether a dead letter passes the filter. Dead letters
// without a delivery (undecodable records) have neither subscription nor
// type, so a --subscription or --type filter excludes them.
func (f *dlqFilter) matches(dl *topics.DeadLetter) bool {
	if (f.subscription != "" || f.typ != "") && dl.Delivery == nil {
		return false
	}
	switch {
	case f.subscription != "" && dl.Delivery.SubscriptionID != f.subscription,
		f.typ != "" && !topics.MatchType(f.typ, dl.Delivery.EventType),
		f.category != "" && dl.FailureCategory != f.category && dl.LastFailureCategory != f.category,
		!f.since.IsZero() && dl.DeadAt.Before(f.since),
		!f.until.IsZero() && !dl.DeadAt.Before(f.until):
		return false
	}
	return true
}

// deadLetter is one dead letter found on the dlq topic; it is also the JSON
// shape of dlq list.
type deadLetter struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	// Redriven says that a redrive marker points at this dead letter.
	Redriven   bool              `json:"redriven"`
	DeadLetter topics.DeadLetter `json:"dead_letter"`
}

// readDLQ reads the dlq topic as it is now (from --since on, when given) and
// returns the dead letters that pass f, oldest first, each flagged when a
// redrive marker points at it. A record that is not a dead letter at all is
// returned as one without delivery, its reason saying why.
func (k *kafka) readDLQ(ctx context.Context, f *dlqFilter) ([]*deadLetter, error) {
	topic := k.names.DLQ()
	// A marker is written after the dead letter it points at, so reading
	// from --since on still sees every marker of the dead letters read.
	// --until cannot bound the read: later markers may point back.
	w, err := k.window(ctx, topic, f.since, time.Time{})
	if err != nil {
		return nil, err
	}
	redriven := map[topics.Source]bool{}
	var out []*deadLetter
	err = k.scan(ctx, w, func(r *kgo.Record) error {
		dl, err := topics.DecodeDeadLetter(r.Value)
		switch {
		case err != nil:
			dl = topics.DeadLetter{Reason: "unreadable dlq record: " + err.Error(), DeadAt: r.Timestamp.UTC()}
		case dl.Redriven != nil:
			redriven[*dl.Redriven] = true
			return nil
		}
		if f.matches(&dl) {
			out = append(out, &deadLetter{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), DeadLetter: dl})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, e := range out {
		e.Redriven = redriven[topics.Source{Topic: topic, Partition: e.Partition, Offset: e.Offset}]
	}
	slices.SortFunc(out, func(a, b *deadLetter) int {
		return cmp.Or(a.DeadLetter.DeadAt.Compare(b.DeadLetter.DeadAt), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return out, nil
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
