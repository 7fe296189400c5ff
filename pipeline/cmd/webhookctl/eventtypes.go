package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	flag "github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/version"
	"github.com/hookpipe/hookpipe/topics"
)

func eventTypesPutCmd(fs *flag.FlagSet) runFunc {
	schema := fs.String("schema", "", "file holding the JSON Schema of the events' data (draft 2020-12 unless its $schema says otherwise)")
	examples := fs.StringArray("example", nil, "file holding an example of the events' data, which the schema must accept; repeatable; replaces the examples")
	description := fs.String("description", "", "what the events mean, shown to tenants")
	validation := fs.String("validation", "", "what becomes of an event the schema refuses: off, warn (delivered and counted; a new type's default) or enforce (refused)")
	deprecated := fs.Bool("deprecated", false, "mark the type deprecated (--deprecated=false to undo)")
	force := fs.Bool("force", false, "write a change that may refuse events the current version accepts")
	return func(ctx context.Context, c *cli, args []string) error {
		name := args[0]
		if err := topics.ValidateEventTypeName(name); err != nil {
			return err
		}
		switch *validation {
		case "", topics.ValidationOff, topics.ValidationWarn, topics.ValidationEnforce:
		default:
			return usagef("--validation %q: want off, warn or enforce", *validation)
		}
		var schemaDoc json.RawMessage
		if fs.Changed("schema") {
			b, err := readJSONFile("schema", *schema)
			if err != nil {
				return err
			}
			schemaDoc = b
		}
		exs := make([]json.RawMessage, 0, len(*examples))
		for _, file := range *examples {
			b, err := readJSONFile("example", file)
			if err != nil {
				return err
			}
			exs = append(exs, b)
		}
		given := []string{"schema", "example", "description", "validation", "deprecated"}
		changes := false
		for _, f := range given {
			changes = changes || fs.Changed(f)
		}

		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		cat, err := k.eventTypes(ctx)
		if err != nil {
			return err
		}
		prev, exists := cat.Get(name)
		et := topics.EventType{Name: name, Version: 1}
		if exists {
			if !changes {
				return usagef("event type %s exists: give what to change (--%s)", name, strings.Join(given, ", --"))
			}
			et = prev.EventType
			et.Version = prev.Version + 1
		}
		if fs.Changed("schema") {
			et.Schema = schemaDoc
		}
		if fs.Changed("example") {
			et.Examples = exs
		}
		if fs.Changed("description") {
			et.Description = *description
		}
		if fs.Changed("validation") {
			et.Validation = *validation
		}
		if fs.Changed("deprecated") {
			et.Deprecated = *deprecated
		}
		et.UpdatedAt = time.Now().UTC()
		next, err := catalog.Compile(et)
		if err != nil {
			return refused(err, et, *schema, *examples, fs.Changed)
		}
		if exists {
			if reasons := catalog.Breaking(prev, next); len(reasons) > 0 {
				if !*force {
					return usagef("event type %s: the change may refuse events version %d accepts: %s (give --force to write it anyway, "+
						"or put the new schema under a new type name)", name, prev.Version, strings.Join(reasons, "; "))
				}
				fmt.Fprintf(c.stderr, "webhookctl: warning: --force: version %d of %s may refuse events version %d accepts: %s\n",
					et.Version, name, prev.Version, strings.Join(reasons, "; "))
			}
		}
		if _, err := k.produce(ctx, &kgo.Record{Topic: k.names.EventTypes(), Key: []byte(name), Value: et.Encode()}); err != nil {
			return err
		}
		return c.printEventTypes([]topics.EventType{et})
	}
}

// readJSONFile reads the JSON document a flag names.
func readJSONFile(flagName, path string) (json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--%s: %v", flagName, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, usagef("--%s %s: the file is empty", flagName, path)
	}
	if !json.Valid(b) {
		return nil, usagef("--%s %s: not JSON", flagName, path)
	}
	return b, nil
}

// refused names the flag behind what catalog.Compile refused in et: the
// schema file, the example file the schema refuses, or, when the examples
// are the current version's, says so.
func refused(err error, et topics.EventType, schemaFile string, exampleFiles []string, gave func(string) bool) error {
	var ie *topics.InvalidError
	if !errors.As(err, &ie) {
		return err
	}
	switch ie.Field {
	case "schema":
		return fmt.Errorf("--schema %s: %w", schemaFile, err)
	case "description":
		return fmt.Errorf("--description: %w", err)
	case "examples":
		if !gave("example") {
			return fmt.Errorf("%w (the examples of version %d, which --example replaces)", err, et.Version-1)
		}
		bare := et
		bare.Examples = nil
		if t, cerr := catalog.Compile(bare); cerr == nil {
			for i, ex := range et.Examples {
				if v := t.Check(ex); v != nil {
					return usagef("--example %s: the schema refuses it %v", exampleFiles[i], v)
				}
			}
		}
		return fmt.Errorf("--example: %w", err)
	}
	return err
}

func eventTypesListCmd(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, _ []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		cat, err := k.eventTypes(ctx)
		if err != nil {
			return err
		}
		ets := []topics.EventType{}
		for _, t := range cat.All() {
			ets = append(ets, t.EventType)
		}
		return c.printEventTypes(ets)
	}
}

func eventTypesGetCmd(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		t, err := k.eventType(ctx, args[0])
		if err != nil {
			return err
		}
		return c.printEventType(t.EventType)
	}
}

var eventTypesDeleteCmd = deleteCmdOf((*kafka).eventType, topics.Names.EventTypes, "event type", "name")

func eventTypesExportCmd(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, _ []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		cat, err := k.eventTypes(ctx)
		if err != nil {
			return err
		}
		doc, err := catalog.AsyncAPI(cat.All(), catalog.AsyncAPITitle, version.Version)
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(doc)
		return err
	}
}

// printEventTypes shows event types: JSON as stored, or a table.
func (c *cli) printEventTypes(ets []topics.EventType) error {
	if c.output == outputJSON {
		return c.printJSON(ets)
	}
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "NAME\tVERSION\tVALIDATION\tSCHEMA\tEXAMPLES\tDEPRECATED\tUPDATED")
	for _, et := range ets {
		schema := "none"
		if len(bytes.TrimSpace(et.Schema)) > 0 {
			schema = "yes"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%t\t%s\n", et.Name, et.Version, et.Mode(), schema, len(et.Examples), et.Deprecated,
			formatTime(et.UpdatedAt))
	}
	return tw.Flush()
}

// printEventType shows one event type: JSON as stored, or its fields
// followed by its schema and examples, indented.
func (c *cli) printEventType(et topics.EventType) error {
	if c.output == outputJSON {
		return c.printJSON(et)
	}
	tw := newTable(c.stdout)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("name", et.Name)
	row("description", orDash(strings.Join(strings.Fields(et.Description), " ")))
	row("validation", et.Mode())
	row("deprecated", strconv.FormatBool(et.Deprecated))
	row("version", strconv.Itoa(et.Version))
	row("updated", formatTime(et.UpdatedAt))
	if len(bytes.TrimSpace(et.Schema)) == 0 {
		row("schema", "none: any data is valid")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	docs := []json.RawMessage{et.Schema}
	titles := []string{"schema"}
	if len(bytes.TrimSpace(et.Schema)) == 0 {
		docs, titles = nil, nil
	}
	for i, ex := range et.Examples {
		docs = append(docs, ex)
		titles = append(titles, fmt.Sprintf("example %d", i+1))
	}
	for i, doc := range docs {
		var b bytes.Buffer
		if err := json.Indent(&b, doc, "", "  "); err != nil {
			return fmt.Errorf("%s: %w", titles[i], err)
		}
		fmt.Fprintf(c.stdout, "\n%s:\n%s\n", titles[i], b.Bytes())
	}
	return nil
}

// eventTypes reads the event-types topic up to its current end: the
// catalog, each type compiled (a record that does not compile is left
// out, as the pipeline leaves it out).
func (k *kafka) eventTypes(ctx context.Context) (*catalog.Catalog, error) {
	topic := k.names.EventTypes()
	cat, err := catalog.New(k.opts, topic, catalog.UnknownAccept, zap.NewNop())
	if err != nil {
		return nil, err
	}
	return cat, readToEnd(ctx, topic, cat)
}

// eventType reads event type name; an error when there is none.
func (k *kafka) eventType(ctx context.Context, name string) (*catalog.Type, error) {
	return entry(ctx, k.eventTypes, "event type", name)
}
