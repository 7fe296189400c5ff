package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	kafkaconfig "github.com/hookpipe/hookpipe/runtime/kafka"
)

// TestEveryCommandDocumented: every command of the tree says what it does
// and shows an example in its --help.
func TestEveryCommandDocumented(t *testing.T) {
	c := &cli{output: outputText, timeout: defaultTimeout}
	var walk func(cmd *cobra.Command)
	n := 0
	walk = func(cmd *cobra.Command) {
		if cmd.Name() != "help" && !strings.HasPrefix(cmd.Name(), "__") {
			n++
			if strings.TrimSpace(cmd.Short) == "" {
				t.Errorf("%q has no Short", cmd.CommandPath())
			}
			if strings.TrimSpace(cmd.Example) == "" {
				t.Errorf("%q has no Example", cmd.CommandPath())
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(c.root(t.Context()))
	if n < len(commands)+len(groups)+2 { // + root, version
		t.Fatalf("walked %d commands, want at least %d", n, len(commands)+len(groups)+2)
	}
}

// TestBadInput: bad command lines answer a one-line error naming what is
// wrong and exit 2, before anything touches Kafka (the broker does not
// exist), and never panic.
func TestBadInput(t *testing.T) {
	h := &harness{t: t, env: map[string]string{kafkaconfig.EnvBrokers: "127.0.0.1:1"}}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown subcommand", []string{"dlq", "purge"}, `unknown command "dlq purge" (dlq takes list, redrive)`},
		{"missing subcommand", []string{"clickhouse"}, "clickhouse: missing subcommand (drop-partitions, expire)"},
		{"unknown flag", []string{"subscriptions", "list", "--bogus"}, "unknown flag: --bogus"},
		{"unknown shorthand", []string{"lag", "-x"}, "unknown shorthand flag: 'x'"},
		{"flag without value", []string{"subscriptions", "create", "--url"}, "flag needs an argument: --url"},
		{"bad duration", []string{"--timeout", "soon", "lag"}, `invalid argument "soon" for "--timeout"`},
		{"bad number", []string{"topics", "ensure", "--partitions", "many"}, `invalid argument "many" for "--partitions"`},
		{"bad float", []string{"subscriptions", "create", "--rate-limit", "fast"}, `invalid argument "fast" for "--rate-limit"`},
		{"bad output", []string{"-o", "yaml", "lag"}, `-o "yaml": want text or json`},
		{"zero timeout", []string{"--timeout", "0s", "lag"}, "--timeout 0s: must be positive"},
		{"missing argument", []string{"subscriptions", "delete"}, "subscriptions delete: want ID, got 0 arguments"},
		{"extra argument", []string{"subscriptions", "enable", "a", "b"}, "want ID, got 2 arguments"},
		{"unexpected argument", []string{"lag", "now"}, `lag: unexpected argument "now"`},
		{"argument to version", []string{"version", "2"}, `unknown command "2"`},
		{"the old --timeout of a subscription is the command's", []string{"subscriptions", "update", "sub_1", "--timeout", "-1s"},
			"--timeout -1s: must be positive"},
		{"unknown event-types subcommand", []string{"event-types", "create"},
			`unknown command "event-types create" (event-types takes list, get, put, delete, export)`},
		{"bad validation mode", []string{"event-types", "put", "invoice.paid", "--validation", "strict"}, `--validation "strict": want off, warn or enforce`},
		{"bad completion shell", []string{"completion", "tcsh"}, `unknown command "completion tcsh" (completion takes bash, fish, powershell, zsh)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(tc.args...)
			checkFailure(t, r, 2)
			if !strings.Contains(r.stderr, tc.says) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.says)
			}
		})
	}
}

// TestVersion: `webhookctl version` and --version print the stamped
// version.
func TestVersion(t *testing.T) {
	h := &harness{t: t, env: map[string]string{}}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out := h.ok(args...); out != "webhookctl dev\n" {
			t.Errorf("%v: %q, want %q", args, out, "webhookctl dev\n")
		}
	}
}

// TestCompletion: the shell completion scripts come out of the tree.
func TestCompletion(t *testing.T) {
	h := &harness{t: t, env: map[string]string{}}
	for shell, want := range map[string]string{"bash": "__webhookctl_", "zsh": "#compdef webhookctl", "fish": "complete -c webhookctl",
		"powershell": "Register-ArgumentCompleter"} {
		if out := h.ok("completion", shell); !strings.Contains(out, want) {
			t.Errorf("completion %s does not contain %q", shell, want)
		}
	}
}
