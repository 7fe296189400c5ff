// Command webhookctl manages the webhook pipeline through its Kafka topics:
// it creates the topics, manages subscriptions on the compacted
// subscriptions topic, publishes test events, lists and redrives dead
// letters, and replays events to one subscription.
//
// Global flags (-o, --brokers, --timeout) go before the command words or
// anywhere after them, except that in "subscriptions create" and
// "subscriptions update" a --timeout after the command words is the
// subscription's HTTP timeout. "dlq redrive" and "replay" run until they are
// done unless --timeout is given. Exit codes: 0 success, 1 runtime error,
// 2 usage error or invalid input.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	kafkaconfig "github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/topics"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels the command; a second one kills it.
	context.AfterFunc(ctx, stop)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

const (
	outputText = "text"
	outputJSON = "json"
)

// cli holds one invocation's global options and its output.
type cli struct {
	output  string        // -o: text or json
	brokers string        // --brokers: overrides WEBHOOKS_KAFKA_BROKERS
	timeout time.Duration // --timeout: bound on the whole command, default 15s
	stdout  io.Writer
	stderr  io.Writer // progress lines of long commands, in text mode
	getenv  func(string) string
	// breaker, when set, is printed with the subscription (subscriptions get).
	breaker *redisstate.BreakerState
}

// runFunc runs a command with its positional arguments, once its flags are
// parsed.
type runFunc func(ctx context.Context, c *cli, args []string) error

// command is one leaf of the command tree.
type command struct {
	name    string   // the command words, e.g. "subscriptions create"
	args    []string // names of the positional arguments, all required
	summary string
	// long commands (redrive, replay) take as long as their work at the
	// rate asked for: without an explicit --timeout they have no deadline,
	// and --timeout bounds only connecting to Kafka.
	long bool
	// setup defines the command's flags on fs and returns the function
	// that runs it.
	setup func(fs *flag.FlagSet) runFunc
}

// synopsis is the command words followed by the positional arguments.
func (cmd command) synopsis() string {
	return strings.Join(append([]string{cmd.name}, cmd.args...), " ")
}

var commands = []command{
	{name: "topics ensure", summary: "create missing pipeline topics, verify existing ones", setup: ensureCmd},
	{name: "subscriptions create", summary: "create a subscription (prints its secret once)", setup: createCmd},
	{name: "subscriptions list", summary: "list subscriptions (secrets masked)", setup: listCmd},
	{name: "subscriptions get", args: []string{"ID"}, summary: "show one subscription (secret masked)", setup: getCmd},
	{name: "subscriptions update", args: []string{"ID"}, summary: "change the given fields of a subscription", setup: updateCmd},
	{name: "subscriptions enable", args: []string{"ID"}, summary: "enable a subscription", setup: enableCmd},
	{name: "subscriptions disable", args: []string{"ID"}, summary: "disable a subscription", setup: disableCmd},
	{name: "subscriptions delete", args: []string{"ID"}, summary: "delete a subscription (tombstone)", setup: deleteCmd},
	{name: "subscriptions rotate-secret", args: []string{"ID"}, summary: "new secret; the old one signs for 24h more", setup: rotateCmd},
	{name: "publish", summary: "publish one event (for testing)", setup: publishCmd},
	{name: "replay", summary: "re-dispatch events in a time range to one subscription", long: true, setup: replayCmd},
	{name: "dlq list", summary: "list dead letters (redriven ones hidden unless --all)", setup: dlqListCmd},
	{name: "dlq redrive", summary: "send dead letters back to the deliverer, each at most once", long: true, setup: redriveCmd},
	{name: "lag", summary: "consumer lag per group and topic; held records and oldest due time on retry tiers", setup: lagCmd},
	{name: "stats", summary: "delivery stats from ClickHouse by subscription, tenant or type (default: last 24h)", setup: statsCmd},
	{name: "clickhouse drop-partitions", summary: "drop the months of attempts older than --older-than (retention on ClickHouse < 20.1)", setup: dropPartitionsCmd},
}

// usageError is bad command-line input: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{output: outputText, timeout: 15 * time.Second, stdout: stdout, stderr: stderr, getenv: getenv}
	err := c.dispatch(ctx, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg += fmt.Sprintf(" (after --timeout %s)", c.timeout)
	}
	// Joined errors span lines; the contract is one line.
	fmt.Fprintln(stderr, "webhookctl: "+strings.ReplaceAll(strings.TrimSpace(msg), "\n", "; "))
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, topics.ErrInvalid) {
		return 2
	}
	return 1
}

func (c *cli) dispatch(ctx context.Context, args []string) error {
	fs := newFlagSet("webhookctl")
	c.globalFlags(fs)
	timeoutGiven := false
	given := func(fl *flag.Flag) { timeoutGiven = timeoutGiven || fl.Name == "timeout" }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage()
		}
		return flagErr("", err)
	}
	fs.Visit(given)
	words := fs.Args()
	if len(words) == 0 || words[0] == "help" {
		c.usage()
		return nil
	}
	cmd, rest, err := lookup(words)
	if err != nil {
		return err
	}
	fs = newFlagSet(cmd.name)
	runCmd := cmd.setup(fs)
	c.globalFlags(fs)
	if fl := fs.Lookup("timeout"); cmd.long && fl.Usage == timeoutUsage {
		fl.Usage = "time limit for the whole command (default none; connecting is bounded by " + fl.DefValue + ")"
		fl.DefValue = "0s" // not printed
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.commandUsage(cmd, fs)
		}
		return flagErr(cmd.name, err)
	}
	switch {
	case len(cmd.args) == 0 && len(pos) > 0:
		return usagef("%s: unexpected argument %q", cmd.name, pos[0])
	case len(pos) != len(cmd.args):
		return usagef("%s: want %s, got %d arguments (see webhookctl %s -h)",
			cmd.name, strings.Join(cmd.args, " "), len(pos), cmd.name)
	}
	if c.output != outputText && c.output != outputJSON {
		return usagef("-o %q: want text or json", c.output)
	}
	if c.timeout <= 0 {
		return usagef("--timeout %s: must be positive", c.timeout)
	}
	fs.Visit(given)
	if !cmd.long || timeoutGiven {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if err := runCmd(ctx, c, pos); err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			// The clients fail requests with "client closed" once
			// ctx is done: say why.
			err = fmt.Errorf("%w: %w", err, cerr)
		}
		return fmt.Errorf("%s: %w", cmd.name, err)
	}
	return nil
}

// lookup finds the command named by the leading words.
func lookup(words []string) (command, []string, error) {
	for _, cmd := range commands {
		n := len(strings.Fields(cmd.name))
		if len(words) >= n && strings.Join(words[:n], " ") == cmd.name {
			return cmd, words[n:], nil
		}
	}
	var verbs []string
	for _, cmd := range commands {
		if group, verb, ok := strings.Cut(cmd.name, " "); ok && group == words[0] {
			verbs = append(verbs, verb)
		}
	}
	switch {
	case len(verbs) > 0 && len(words) == 1:
		return command{}, nil, usagef("%s: missing subcommand (%s)", words[0], strings.Join(verbs, ", "))
	case len(verbs) > 0:
		return command{}, nil, usagef("unknown command %q (%s takes %s)", words[0]+" "+words[1], words[0], strings.Join(verbs, ", "))
	}
	return command{}, nil, usagef("unknown command %q (see webhookctl help)", words[0])
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

const timeoutUsage = "time limit for the whole command"

// globalFlags defines the global flags on fs, bound to c, unless the
// command defines a flag of the same name. The current values are the
// defaults, so a later parse keeps what an earlier one set.
func (c *cli) globalFlags(fs *flag.FlagSet) {
	if fs.Lookup("o") == nil {
		fs.StringVar(&c.output, "o", c.output, "output format: text or json")
	}
	if fs.Lookup("brokers") == nil {
		fs.StringVar(&c.brokers, "brokers", c.brokers, "comma-separated Kafka brokers (overrides "+kafkaconfig.EnvBrokers+")")
	}
	if fs.Lookup("timeout") == nil {
		fs.DurationVar(&c.timeout, "timeout", c.timeout, timeoutUsage)
	}
}

// parseInterspersed parses flags wherever they appear among the positional
// arguments and returns the positional arguments. Everything after the first
// "--" is positional (a flag value "--" must be written --flag=--).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func flagErr(cmd string, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	if cmd == "" {
		return usagef("%v (see webhookctl help)", err)
	}
	return usagef("%s: %v (see webhookctl %s -h)", cmd, err, cmd)
}

func (c *cli) usage() {
	w := c.stdout
	fmt.Fprint(w, `webhookctl manages the webhook pipeline through its Kafka topics.

usage: webhookctl [global flags] <command> [flags] [arguments]

commands:
`)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-32s %s\n", cmd.synopsis(), cmd.summary)
	}
	fmt.Fprintf(w, `
global flags (before the command, or after it):
  -o text|json        output format (default text)
  --brokers LIST      comma-separated Kafka brokers (default $%s or %s)
  --timeout DURATION  time limit for the whole command (default 15s); in
                      "subscriptions create|update" a --timeout after the
                      command words is the subscription's HTTP timeout;
                      "dlq redrive" and "replay" run until done (or
                      interrupted) unless --timeout is given, and connecting
                      is bounded by 15s

TIME (--since, --until) is an RFC 3339 time (2026-11-22T10:00:00Z) or a
duration ago (90m, 2h, 3d).

environment: %s, %s, %s
Kafka TLS and SASL: %s, %s,
%s, %s, %s
ClickHouse (stats, clickhouse): %s (default %s),
%s (default %s), %s, %s

"webhookctl <command> -h" lists a command's flags.
`, kafkaconfig.EnvBrokers, kafkaconfig.DefaultBrokers, kafkaconfig.EnvBrokers, kafkaconfig.EnvPrefix, kafkaconfig.EnvRetryTiers,
		kafkaconfig.EnvKafkaTLS, kafkaconfig.EnvKafkaTLSDir, kafkaconfig.EnvKafkaSASLMechanism, kafkaconfig.EnvKafkaSASLUsername, kafkaconfig.EnvKafkaSASLPassword,
		envClickHouseAddr, defaultClickHouseAddr, envClickHouseDatabase, defaultDatabase, envClickHouseUser, envClickHousePassword)
}

func (c *cli) commandUsage(cmd command, fs *flag.FlagSet) {
	fmt.Fprintf(c.stdout, "usage: webhookctl %s [flags]\n\n%s\n\nflags:\n", cmd.synopsis(), cmd.summary)
	fs.SetOutput(c.stdout)
	fs.PrintDefaults()
}

// printJSON writes v as indented JSON, without HTML escaping.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
