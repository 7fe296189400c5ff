// Package configdoc renders docs/configuration.md from the tags of the
// components' configuration structs (package runtime/config reads the
// same tags), so the page cannot drift from the code.
package configdoc

import (
	"fmt"
	"strings"

	"github.com/hookpipe/hookpipe/api"

	"github.com/hookpipe/hookpipe/deliverer"
	"github.com/hookpipe/hookpipe/dispatcher"
	"github.com/hookpipe/hookpipe/recorder"
	"github.com/hookpipe/hookpipe/retrier"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/process"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
)

// Path is where the page lives, from the repository root.
const Path = "docs/configuration.md"

type section struct {
	title, intro string
	cfg          any
}

var sections = []section{
	{"Every component", "The process itself: every binary but `webhookctl` takes no flags but `--version`.", process.Settings{}},
	{"Kafka", "Every component and `webhookctl`.", kafka.Settings{}},
	{"Secrets at rest", "The dispatcher, the deliverer and `webhookctl` (they read or write subscriptions).", config.Secrets{}},
	{"Redis", "Shared state of the replicas: event dedup (dispatcher), breakers, rate limits and auto-disable " +
		"(deliverer), recovery marks (retrier), per-key request rates (API). Every use fails open while Redis is down.", redisstate.Config{}},
	{"Dispatcher", "", dispatcher.Config{}},
	{"Deliverer", "", deliverer.Config{}},
	{"Retrier", "", retrier.Config{}},
	{"Recorder", "Also read by `webhookctl` for its ClickHouse commands.", recorder.Config{}},
	{"API", "The control plane's HTTP API (docs/api.md); it also reads the Kafka and secrets settings.", api.Config{}},
}

// Render returns the page.
func Render() string {
	var b strings.Builder
	b.WriteString("# Configuration\n\n")
	b.WriteString("Every component reads its configuration from `WEBHOOKS_*` environment variables. An unset or\n" +
		"empty variable takes its default; a component reports every bad variable at once and exits with\n" +
		"status 2. The Helm chart sets them from `values.yaml`. The column valid is each variable's\n" +
		"`validate` tag in words: a component refuses a value outside it. Rules no tag says (variables\n" +
		"that go together, formats such as host:port) are in the meaning.\n\n")
	b.WriteString("This page is generated from the code by `make docs` (`pipeline/cmd/configdoc`); a test fails\n" +
		"when it is stale.\n")
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.title)
		if s.intro != "" {
			b.WriteString(s.intro + "\n\n")
		}
		b.WriteString("| variable | default | valid | meaning |\n|---|---|---|---|\n")
		for _, v := range config.Vars(s.cfg) {
			def, valid := "-", "-"
			if v.Default != "" {
				def = "`" + v.Default + "`"
			}
			if v.Valid != "" {
				valid = v.Valid
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, def, valid, strings.ReplaceAll(v.Desc, "|", `\|`))
		}
	}
	return b.String()
}
