package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	kafkaconfig "github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/version"
)

// command is one leaf of the command tree.
type command struct {
	name    string   // the command words, e.g. "subscriptions create"
	args    []string // names of the positional arguments, all required
	summary string
	example string
	// long commands (redrive, replay) take as long as their work at the
	// rate asked for: without an explicit --timeout they have no deadline,
	// and --timeout bounds only connecting to Kafka.
	long bool
	// setup defines the command's flags on fs and returns the function
	// that runs it.
	setup func(fs *flag.FlagSet) runFunc
}

var commands = []command{
	{name: "topics ensure", summary: "create missing pipeline topics, verify existing ones", setup: ensureCmd,
		example: "webhookctl topics ensure --partitions 12 --replication-factor 3"},
	{name: "subscriptions create", summary: "create a subscription (prints its secret once)", setup: createCmd,
		example: "webhookctl subscriptions create --url https://example.com/hooks --events 'order.*' --tenant acme\n" +
			"webhookctl subscriptions create --url https://example.com/hooks --events '*' --ordering key --rate-limit 50 --http-timeout 5s"},
	{name: "subscriptions list", summary: "list subscriptions (secrets masked)", setup: listCmd,
		example: "webhookctl subscriptions list --tenant acme -o json"},
	{name: "subscriptions get", args: []string{"ID"}, summary: "show one subscription (secret masked)", setup: getCmd,
		example: "webhookctl subscriptions get sub_0123456789abcdefghij"},
	{name: "subscriptions update", args: []string{"ID"}, summary: "change the given fields of a subscription", setup: updateCmd,
		example: "webhookctl subscriptions update sub_0123456789abcdefghij --events 'order.*,invoice.paid' --http-timeout 10s"},
	{name: "subscriptions enable", args: []string{"ID"}, summary: "enable a subscription", setup: enableCmd,
		example: "webhookctl subscriptions enable sub_0123456789abcdefghij"},
	{name: "subscriptions disable", args: []string{"ID"}, summary: "disable a subscription", setup: disableCmd,
		example: "webhookctl subscriptions disable sub_0123456789abcdefghij --reason 'endpoint migration'"},
	{name: "subscriptions recover", args: []string{"ID"}, summary: "send again, once, the events whose last attempt in a window failed (an API operation)",
		setup: recoverCmd, example: "webhookctl subscriptions recover sub_0123456789abcdefghij --since 2026-11-26T08:00:00Z --until 2026-11-26T09:00:00Z"},
	{name: "subscriptions delete", args: []string{"ID"}, summary: "delete a subscription (tombstone)", setup: deleteCmd,
		example: "webhookctl subscriptions delete sub_0123456789abcdefghij"},
	{name: "subscriptions rotate-secret", args: []string{"ID"}, summary: "new secret; the old one signs for 24h more", setup: rotateCmd,
		example: "webhookctl subscriptions rotate-secret sub_0123456789abcdefghij"},
	{name: "apikeys create", summary: "create a key of the HTTP API (prints it once)", setup: apikeysCreateCmd,
		example: "webhookctl apikeys create --name support\nwebhookctl apikeys create --name acme-portal --tenant acme"},
	{name: "apikeys list", summary: "list the keys of the HTTP API (never the keys themselves)", setup: apikeysListCmd,
		example: "webhookctl apikeys list -o json"},
	{name: "apikeys revoke", args: []string{"ID"}, summary: "revoke a key of the HTTP API", setup: apikeysRevokeCmd,
		example: "webhookctl apikeys revoke key_0123456789abcdefghij"},
	{name: "tenants set-quota", args: []string{"TENANT"}, summary: "set a tenant's delivery rate, most subscriptions or retention, over the defaults", setup: tenantsSetQuotaCmd,
		example: "webhookctl tenants set-quota acme --rate 50 --max-subscriptions 20\nwebhookctl tenants set-quota acme --retention-days 30\nwebhookctl tenants set-quota acme --rate default"},
	{name: "tenants list", summary: "list the tenants with quotas of their own", setup: tenantsListCmd,
		example: "webhookctl tenants list -o json"},
	{name: "event-types list", summary: "list the event catalog's types", setup: eventTypesListCmd,
		example: "webhookctl event-types list -o json"},
	{name: "event-types get", args: []string{"NAME"}, summary: "show an event type with its schema and examples", setup: eventTypesGetCmd,
		example: "webhookctl event-types get invoice.paid"},
	{name: "event-types put", args: []string{"NAME"}, summary: "create or update an event type (a change that may refuse events needs --force)",
		setup: eventTypesPutCmd,
		example: "webhookctl event-types put invoice.paid --schema invoice.schema.json --example paid.json --description 'An invoice was paid.'\n" +
			"webhookctl event-types put invoice.paid --validation enforce\nwebhookctl event-types put invoice.paid --deprecated"},
	{name: "event-types delete", args: []string{"NAME"}, summary: "remove an event type from the catalog (tombstone)", setup: eventTypesDeleteCmd,
		example: "webhookctl event-types delete invoice.paid"},
	{name: "event-types export", summary: "the catalog as an AsyncAPI 3.0.0 document (JSON) of what endpoints receive", setup: eventTypesExportCmd,
		example: "webhookctl event-types export > asyncapi.json"},
	{name: "publish", summary: "publish one event (for testing)", setup: publishCmd,
		example: "webhookctl publish --type order.created --tenant acme --key order-42 --data '{\"total\": 12}'"},
	{name: "events cancel", args: []string{"EVENT_ID"}, summary: "cancel a scheduled event: its deliveries still waiting for deliver_at are skipped",
		setup: cancelEventCmd, example: "webhookctl events cancel evt_0123456789abcdefghij\nwebhookctl events cancel evt_0123456789abcdefghij --tenant acme"},
	{name: "replay", summary: "re-dispatch events in a time range to one subscription", long: true, setup: replayCmd,
		example: "webhookctl replay --subscription sub_0123456789abcdefghij --since 2h --until 1h --rate 100"},
	{name: "dlq list", summary: "list dead letters (redriven ones hidden unless --all)", setup: dlqListCmd,
		example: "webhookctl dlq list --subscription sub_0123456789abcdefghij --category timeout --since 24h"},
	{name: "dlq redrive", summary: "send dead letters back, each at most once: deliveries to the deliverer, events their schema refused to the dispatcher", long: true, setup: redriveCmd,
		example: "webhookctl dlq redrive --subscription sub_0123456789abcdefghij --rate 50\nwebhookctl dlq redrive --category exhausted --dry-run"},
	{name: "lag", summary: "consumer lag per group and topic; held records and oldest due time on retry tiers", setup: lagCmd,
		example: "webhookctl lag --group webhooks-deliverer -o json"},
	{name: "stats", summary: "delivery stats from ClickHouse by subscription, tenant or type (default: last 24h)", setup: statsCmd,
		example: "webhookctl stats --by tenant --since 7d"},
	{name: "alert-channels list", summary: "list the alert channels (URLs masked)", setup: alertChannelsListCmd,
		example: "webhookctl alert-channels list --tenant acme -o json"},
	{name: "alert-channels add", summary: "add a channel told of operational events in digests: email, slack or webhook", setup: alertChannelsAddCmd,
		example: "webhookctl alert-channels add --tenant acme --kind email --to ops@acme.example --digest 10m\n" +
			"webhookctl alert-channels add --kind slack --url https://hooks.slack.com/services/T0/B0/XXXX --types webhook.endpoint.disabled"},
	{name: "alert-channels update", args: []string{"ID"}, summary: "change the settings given of an alert channel, keeping the others (its URL too)",
		setup: alertChannelsUpdateCmd, example: "webhookctl alert-channels update ach_0123456789abcdefghij --types webhook.endpoint.disabled --digest 15m"},
	{name: "alert-channels delete", args: []string{"ID"}, summary: "delete an alert channel (tombstone)", setup: alertChannelsDeleteCmd,
		example: "webhookctl alert-channels delete ach_0123456789abcdefghij"},
	{name: "alert-channels test", args: []string{"ID"}, summary: "send a test message to an alert channel (email through WEBHOOKS_SMTP_*)",
		setup: alertChannelsTestCmd, example: "webhookctl alert-channels test ach_0123456789abcdefghij"},
	{name: "clickhouse drop-partitions", summary: "drop the months of attempts older than --older-than (retention on ClickHouse < 20.1)",
		setup: dropPartitionsCmd, example: "webhookctl clickhouse drop-partitions --older-than 90d --dry-run"},
	{name: "clickhouse expire", summary: "delete the attempts past their tenant's retention (one mutation per table; run it daily)",
		setup: expireCmd, example: "webhookctl clickhouse expire --dry-run\nwebhookctl clickhouse expire --default-days 90 --wait"},
	{name: "transformations test", args: []string{"FILE"}, summary: "run a transformation on a sample event here: the request it would make, or why it fails",
		setup: transformationsTestCmd, example: "webhookctl transformations test shape.js --type order.paid --data '{\"amount\": 12}'"},
	{name: "messages expunge", args: []string{"EVENT_ID"}, summary: "clear an event's response samples and hide its payload for good (privacy)",
		setup: expungeCmd, example: "webhookctl messages expunge evt_0123456789abcdefghij --wait"},
}

// groups are the first words of the commands that have several.
var groups = map[string]string{
	"topics":          "pipeline topics",
	"subscriptions":   "endpoints that receive events",
	"dlq":             "dead letters",
	"clickhouse":      "the recorder's ClickHouse tables",
	"apikeys":         "keys of the HTTP API (docs/api.md)",
	"tenants":         "per-tenant quotas and retention",
	"messages":        "the message log in ClickHouse",
	"events":          "scheduled events",
	"event-types":     "the event catalog: types, their schemas and examples",
	"alert-channels":  "where owners and operators are told of operational events",
	"transformations": "subscriptions' JavaScript transformations",
}

// root builds the command tree of one invocation, bound to c.
func (c *cli) root(ctx context.Context) *cobra.Command {
	root := &cobra.Command{
		Use:   "webhookctl",
		Short: "manage the webhook pipeline through its Kafka topics",
		Long: "webhookctl manages the webhook pipeline through its Kafka topics.\n\nCommands:\n" + overview() + `
TIME (--since, --until) is an RFC 3339 time (2026-11-22T10:00:00Z) or a duration ago (90m, 2h, 3d).

Environment: ` + kafkaconfig.EnvBrokers + ` (default ` + kafkaconfig.DefaultBrokers + `), ` + kafkaconfig.EnvPrefix + `, ` +
			kafkaconfig.EnvRetryTiers + `; Kafka TLS and SASL: ` + kafkaconfig.EnvKafkaTLS + `, ` + kafkaconfig.EnvKafkaTLSDir + `, ` +
			kafkaconfig.EnvKafkaSASLMechanism + `, ` + kafkaconfig.EnvKafkaSASLUsername + `, ` + kafkaconfig.EnvKafkaSASLPassword + `;
ClickHouse (stats, clickhouse, messages; replay and dlq redrive skip expunged events when set): ` + envClickHouseAddr + `, ` + envClickHouseDatabase + `, ` + envClickHouseUser + `, ` + envClickHousePassword + `
(docs/configuration.md, docs/webhookctl.md).`,
		Example: indent("webhookctl topics ensure\n" +
			"webhookctl subscriptions create --url https://example.com/hooks --events 'order.*'\n" +
			"webhookctl -o json dlq list --since 1h"),
		Version:       version.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	// Before the completion command, which takes the writer at creation.
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usagef("%s: %v (see %s --help)", cmd.CommandPath(), err, cmd.CommandPath())
	})
	pf := root.PersistentFlags()
	pf.StringVarP(&c.output, "output", "o", c.output, "output format: text or json")
	pf.StringVar(&c.brokers, "brokers", c.brokers, "comma-separated Kafka brokers (overrides "+kafkaconfig.EnvBrokers+")")
	pf.DurationVar(&c.timeout, "timeout", c.timeout,
		"time limit for the whole command; dlq redrive and replay run until done unless given, and it bounds their connecting")
	root.SetVersionTemplate("webhookctl {{.Version}}\n")
	root.AddCommand(&cobra.Command{
		Use: "version", Short: "print webhookctl's version", Args: noArgs,
		Example: "  webhookctl version",
		Run:     func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "webhookctl", version.Version) },
	})
	parents := map[string]*cobra.Command{}
	for _, def := range commands {
		parent := root
		words := strings.Fields(def.name)
		if len(words) == 2 {
			if parents[words[0]] == nil {
				parents[words[0]] = groupCommand(words[0])
				root.AddCommand(parents[words[0]])
			}
			parent = parents[words[0]]
		}
		parent.AddCommand(c.leaf(ctx, def, words[len(words)-1]))
	}
	root.InitDefaultCompletionCmd()
	for _, cmd := range root.Commands() {
		if cmd.Name() != "completion" {
			continue
		}
		cmd.Example = indent("source <(webhookctl completion bash)\nwebhookctl completion zsh > \"${fpath[1]}/_webhookctl\"")
		var shells []string
		for _, sub := range cmd.Commands() {
			shells = append(shells, sub.Name())
			sub.Example = indent("webhookctl completion " + sub.Name() + " --help")
		}
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("completion: missing shell (%s)", strings.Join(shells, ", "))
			}
			return usagef("unknown command %q (completion takes %s)", "completion "+args[0], strings.Join(shells, ", "))
		}
	}
	return root
}

// overview lists every command with its arguments, one line each.
func overview() string {
	var b strings.Builder
	for _, def := range commands {
		fmt.Fprintf(&b, "  %-32s %s\n", strings.Join(append([]string{def.name}, def.args...), " "), def.summary)
	}
	return b.String()
}

// groupCommand is a word that only holds subcommands: run alone or with an
// unknown subcommand it is a usage error.
func groupCommand(word string) *cobra.Command {
	var verbs []string
	for _, def := range commands {
		if g, v, ok := strings.Cut(def.name, " "); ok && g == word {
			verbs = append(verbs, v)
		}
	}
	return &cobra.Command{
		Use:     word + " <command>",
		Short:   groups[word],
		Example: "  webhookctl " + word + " " + verbs[0] + " --help",
		Args:    cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s: missing subcommand (%s)", word, strings.Join(verbs, ", "))
			}
			return usagef("unknown command %q (%s takes %s)", word+" "+args[0], word, strings.Join(verbs, ", "))
		},
	}
}

// leaf is the cobra command of def.
func (c *cli) leaf(ctx context.Context, def command, verb string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     strings.Join(append([]string{verb}, def.args...), " "),
		Short:   def.summary,
		Example: indent(def.example),
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(def.args) == 0 && len(args) > 0:
				return usagef("%s: unexpected argument %q", def.name, args[0])
			case len(args) != len(def.args):
				return usagef("%s: want %s, got %d arguments (see webhookctl %s --help)",
					def.name, strings.Join(def.args, " "), len(args), def.name)
			}
			return nil
		},
	}
	runCmd := def.setup(cmd.Flags())
	if def.long {
		cmd.Long = def.summary + ".\n\nIt runs until done (or interrupted) unless --timeout is given; connecting is bounded by " +
			defaultTimeout.String() + "."
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if c.output != outputText && c.output != outputJSON {
			return usagef("-o %q: want text or json", c.output)
		}
		if c.timeout <= 0 {
			return usagef("--timeout %s: must be positive", c.timeout)
		}
		ctx := ctx
		if !def.long || cmd.Flags().Changed("timeout") {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.timeout)
			defer cancel()
		}
		if err := runCmd(ctx, c, args); err != nil {
			if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
				// The clients fail requests with "client closed" once
				// ctx is done: say why.
				err = fmt.Errorf("%w: %w", err, cerr)
			}
			return &runError{err: fmt.Errorf("%s: %w", def.name, err)}
		}
		return nil
	}
	return cmd
}

// noArgs refuses positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q (see %s --help)", args[0], cmd.CommandPath())
	}
	return nil
}

// indent sets the example lines off as cobra's help expects.
func indent(example string) string {
	return "  " + strings.ReplaceAll(example, "\n", "\n  ")
}
