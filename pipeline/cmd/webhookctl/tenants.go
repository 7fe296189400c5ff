package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	flag "github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// envTenantMaxSubscriptions is the default most subscriptions of a tenant,
// as the API reads it; webhookctl refuses past it too.
const envTenantMaxSubscriptions = "WEBHOOKS_TENANT_MAX_SUBSCRIPTIONS"

// envRetentionDays is the default retention of attempts in ClickHouse, as
// the recorder reads it; clickhouse expire applies it to the tenants
// without an override.
const envRetentionDays = schema.EnvRetentionDays

// quotaValue reads a quota flag: a number, "unlimited" (0) or "default"
// (nil: the default applies).
func quotaValue(flagName, v string, parse func(string) (float64, error)) (*float64, error) {
	switch v {
	case "default":
		return nil, nil
	case "unlimited":
		zero := 0.0
		return &zero, nil
	}
	n, err := parse(v)
	if err != nil || n <= 0 {
		return nil, usagef("--%s: %q is not a positive number, unlimited or default", flagName, v)
	}
	return &n, nil
}

// wholeNumber parses a count for quotaValue.
func wholeNumber(s string) (float64, error) {
	n, err := strconv.Atoi(s)
	return float64(n), err
}

// intOf is a quota read by quotaValue as an int (nil stays nil).
func intOf(n *float64) *int {
	if n == nil {
		return nil
	}
	m := int(*n)
	return &m
}

func tenantsSetQuotaCmd(fs *flag.FlagSet) runFunc {
	rate := fs.String("rate", "", "deliveries per second of the tenant's events across all deliverers: a number, unlimited, or default (WEBHOOKS_TENANT_RATE)")
	maxSubs := fs.String("max-subscriptions", "", "most subscriptions of the tenant: a number, unlimited, or default ("+envTenantMaxSubscriptions+")")
	retention := fs.String("retention-days", "", "days the tenant's attempts stay in ClickHouse (webhookctl clickhouse expire): a number, unlimited, or default ("+envRetentionDays+")")
	return func(ctx context.Context, c *cli, args []string) error {
		if *rate == "" && *maxSubs == "" && *retention == "" {
			return usagef("give --rate, --max-subscriptions, --retention-days or several")
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		t, err := k.tenants(ctx)
		if err != nil {
			return err
		}
		ten := topics.Tenant{ID: args[0]}
		if cur := t.Get(args[0]); cur != nil {
			ten = *cur
		}
		if *rate != "" {
			if ten.RatePerS, err = quotaValue("rate", *rate, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err != nil {
				return err
			}
		}
		if *maxSubs != "" {
			n, err := quotaValue("max-subscriptions", *maxSubs, wholeNumber)
			if err != nil {
				return err
			}
			ten.MaxSubscriptions = intOf(n)
		}
		if *retention != "" {
			n, err := quotaValue("retention-days", *retention, wholeNumber)
			if err != nil {
				return err
			}
			ten.RetentionDays = intOf(n)
		}
		ten.UpdatedAt = time.Now().UTC()
		if err := ten.Validate(); err != nil {
			return usagef("%v", err)
		}
		rec := &kgo.Record{Topic: k.names.Tenants(), Key: []byte(ten.ID), Value: ten.Encode()}
		if ten.RatePerS == nil && ten.MaxSubscriptions == nil && ten.RetentionDays == nil {
			rec.Value = nil // nothing overridden: a tombstone
		}
		if _, err := k.produce(ctx, rec); err != nil {
			return err
		}
		return c.printTenants([]*topics.Tenant{&ten})
	}
}

func tenantsListCmd(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, _ []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		t, err := k.tenants(ctx)
		if err != nil {
			return err
		}
		return c.printTenants(t.All())
	}
}

// printTenants shows tenants' overrides: JSON as stored, or a table.
func (c *cli) printTenants(ts []*topics.Tenant) error {
	if c.output == outputJSON {
		return c.printJSON(ts)
	}
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "TENANT\tRATE\tMAX SUBSCRIPTIONS\tRETENTION\tUPDATED")
	for _, t := range ts {
		rate, subs, retention := "default", "default", "default"
		if t.RatePerS != nil {
			rate = strconv.FormatFloat(*t.RatePerS, 'g', -1, 64) + "/s"
			if *t.RatePerS == 0 {
				rate = "unlimited"
			}
		}
		if t.MaxSubscriptions != nil {
			subs = strconv.Itoa(*t.MaxSubscriptions)
			if *t.MaxSubscriptions == 0 {
				subs = "unlimited"
			}
		}
		if t.RetentionDays != nil {
			retention = strconv.Itoa(*t.RetentionDays) + "d"
			if *t.RetentionDays == 0 {
				retention = "unlimited"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, rate, subs, retention, formatTime(t.UpdatedAt))
	}
	return tw.Flush()
}

// tenants reads the tenants topic up to its current end.
func (k *kafka) tenants(ctx context.Context) (*table.TenantTable, error) {
	topic := k.names.Tenants()
	t, err := table.NewTenantTable(k.opts, topic, zap.NewNop())
	if err != nil {
		return nil, err
	}
	return t, readToEnd(ctx, topic, t)
}

// room refuses s when its tenant has its most subscriptions in subs.
func (c *cli) room(ctx context.Context, k *kafka, subs *table.Table, s *topics.Subscription) error {
	if s.Tenant == "" {
		return nil
	}
	def := 0
	if v := c.getenv(envTenantMaxSubscriptions); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return usagef("%s=%q is not a count", envTenantMaxSubscriptions, v)
		}
		def = n
	}
	t, err := k.tenants(ctx)
	if err != nil {
		return err
	}
	if err := t.Room(subs, def, s); errors.Is(err, table.ErrSubscriptionLimit) {
		return fmt.Errorf("%w (webhookctl tenants set-quota %s --max-subscriptions N)", err, s.Tenant)
	} else if err != nil {
		return err
	}
	return nil
}
