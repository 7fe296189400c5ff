// Command webhookctl manages the webhook pipeline through its Kafka topics:
// it creates the topics, manages subscriptions on the compacted
// subscriptions topic and the event catalog on the event-types topic
// (exported as an AsyncAPI document), publishes test events, lists and redrives dead
// letters, replays events to one subscription, and reads delivery stats
// from ClickHouse. Its command tree is built with cobra (root.go): --help
// with examples on every command, shell completion, and `webhookctl
// version`. Exit codes: 0 success, 1 runtime error, 2 usage error or
// invalid input.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	flag "github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

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

// usageError is bad command-line input: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{output: outputText, timeout: defaultTimeout, stdout: stdout, stderr: stderr, getenv: getenv}
	root := c.root(ctx)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var re *runError
	if !errors.As(err, &re) {
		err = &usageError{msg: err.Error()} // cobra's: unknown command or flag, wrong arguments
	} else {
		err = re.err
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

// runError is what a command's run returned, as opposed to cobra's own
// errors about the command line.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }

// defaultTimeout bounds a command, or for long ones, connecting.
const defaultTimeout = 15 * time.Second

// printJSON writes v as indented JSON, without HTML escaping.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// deleteCmdOf makes the command deleting what its argument names: get reads
// it (an error when there is none), then its tombstone goes to topic. It
// says "deleted what KEY", or in JSON gives KEY under field with "deleted":
// true.
func deleteCmdOf[V any](get func(*kafka, context.Context, string) (V, error), topic func(topics.Names) string, what, field string) func(*flag.FlagSet) runFunc {
	return func(*flag.FlagSet) runFunc {
		return func(ctx context.Context, c *cli, args []string) error {
			k, err := c.connect(ctx)
			if err != nil {
				return err
			}
			defer k.close()
			if _, err := get(k, ctx, args[0]); err != nil {
				return err
			}
			if _, err := k.produce(ctx, &kgo.Record{Topic: topic(k.names), Key: []byte(args[0])}); err != nil {
				return err
			}
			if c.output == outputJSON {
				return c.printJSON(map[string]any{field: args[0], "deleted": true})
			}
			fmt.Fprintf(c.stdout, "deleted %s %s\n", what, args[0])
			return nil
		}
	}
}
