package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	flag "github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/api/keys"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// apiKeyView is an API key as webhookctl prints it: the key itself only
// when it was just created.
type apiKeyView struct {
	ID        string     `json:"id"`
	Name      string     `json:"name,omitempty"`
	Tenant    string     `json:"tenant,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Key       string     `json:"key,omitempty"`
}

func viewOf(k topics.APIKey) apiKeyView {
	return apiKeyView{ID: k.ID, Name: k.Name, Tenant: k.Tenant, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

func apikeysCreateCmd(fs *flag.FlagSet) runFunc {
	name := fs.String("name", "", "what the key is for")
	tenant := fs.String("tenant", "", "limit the key to this tenant (default: an admin key, every tenant)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *tenant != "" {
			if err := topics.ValidateID("api key", "tenant", *tenant); err != nil {
				return err
			}
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		key, rec, err := keys.Create(ctx, k.cl, k.names, *name, *tenant)
		if err != nil {
			return topicErr(k.names.APIKeys(), err)
		}
		v := viewOf(rec)
		v.Key = key
		if c.output == outputJSON {
			return c.printJSON(v)
		}
		fmt.Fprintf(c.stdout, "created API key %s (%s)\nkey: %s\n(shown once: only its hash is stored)\n", rec.ID, scope(rec), key)
		return nil
	}
}

func scope(k topics.APIKey) string {
	if k.Admin() {
		return "admin"
	}
	return "tenant " + k.Tenant
}

func apikeysListCmd(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, _ []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		t, err := k.apiKeys(ctx)
		if err != nil {
			return err
		}
		views := []apiKeyView{}
		for _, key := range t.All() {
			views = append(views, viewOf(key))
		}
		if c.output == outputJSON {
			return c.printJSON(views)
		}
		tw := newTable(c.stdout)
		fmt.Fprintln(tw, "ID\tSCOPE\tNAME\tCREATED\tREVOKED")
		for _, key := range t.All() {
			revoked := "-"
			if key.RevokedAt != nil {
				revoked = formatTime(*key.RevokedAt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", key.ID, scope(key), key.Name, formatTime(key.CreatedAt), revoked)
		}
		return tw.Flush()
	}
}

func apikeysRevokeCmd(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		t, err := k.apiKeys(ctx)
		if err != nil {
			return err
		}
		key, err := keys.Revoke(ctx, k.cl, k.names, t, args[0])
		if errors.Is(err, keys.ErrNotFound) {
			return fmt.Errorf("API key %s not found", args[0])
		}
		if err != nil {
			return topicErr(k.names.APIKeys(), err)
		}
		if c.output == outputJSON {
			return c.printJSON(viewOf(key))
		}
		fmt.Fprintf(c.stdout, "revoked API key %s\n", key.ID)
		return nil
	}
}

// apiKeys reads the apikeys topic up to its current end.
func (k *kafka) apiKeys(ctx context.Context) (*table.KeyTable, error) {
	topic := k.names.APIKeys()
	t, err := table.NewKeyTable(k.opts, topic, zap.NewNop())
	if err != nil {
		return nil, err
	}
	return t, readToEnd(ctx, topic, t)
}
