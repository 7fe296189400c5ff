package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hookpipe/hookpipe/runtime/transform"
	"github.com/hookpipe/hookpipe/topics"
)

// transformationsTestCmd runs a transformation here, on a sample event,
// under the limits a deliverer applies: what it would send, or why not.
func transformationsTestCmd(fs *flag.FlagSet) runFunc {
	typ := fs.String("type", "webhook.test", "the sample event's type")
	data := fs.String("data", "{}", "the sample event's data, JSON, or @file holding it")
	key := fs.String("key", "", "the sample event's ordering key")
	endpoint := fs.String("url", "https://example.com/webhooks", "the endpoint the request would go to")
	return func(ctx context.Context, c *cli, args []string) error {
		src, err := os.ReadFile(args[0])
		if err != nil {
			return usagef("%v", err)
		}
		script, err := transform.Compile(string(src))
		if err != nil {
			return usagef("%v", err)
		}
		sample, err := readValue(*data)
		if err != nil || !json.Valid(sample) {
			return usagef("--data: not JSON")
		}
		out, err := script.Run(ctx, transform.Input{ID: topics.NewID("evt_test_"), Type: *typ, Timestamp: time.Now().UTC(),
			Key: *key, Data: sample, URL: *endpoint, Header: http.Header{}})
		if errors.Is(err, transform.ErrFailed) {
			return fmt.Errorf("the transformation fails (a delivery would be dead-lettered, category transformation): %w", err)
		}
		if err != nil {
			return usagef("%v", err)
		}
		if c.output == outputJSON {
			return c.printJSON(out)
		}
		if out.Cancel {
			fmt.Fprintln(c.stdout, "cancelled: nothing would be sent")
			return nil
		}
		fmt.Fprintf(c.stdout, "%s %s\n", out.Method, out.URL)
		for k := range out.Header {
			fmt.Fprintf(c.stdout, "%s: %s\n", k, out.Header.Get(k))
		}
		fmt.Fprintf(c.stdout, "\n%s\n", out.Body)
		return nil
	}
}

// readValue is v, or the contents of the file @v names.
func readValue(v string) ([]byte, error) {
	if name, ok := strings.CutPrefix(v, "@"); ok {
		return os.ReadFile(name)
	}
	return []byte(v), nil
}
