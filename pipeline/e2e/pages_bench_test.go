package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/recorder/schema"
)

// BenchmarkDashboardPages is the dashboard's row of `make bench`: the time
// to answer each page (the API on 127.0.0.1, signed in) with 100,000
// messages of ten endpoints over the last day in ClickHouse, p50 and max
// of 20 loads each; the target is under 200 ms.
func BenchmarkDashboardPages(b *testing.B) {
	const (
		messages = 100000
		subs     = 10
		loads    = 20
	)
	for b.Loop() {
		e := newEnv(b)
		e.vars["WEBHOOKS_API_RATE_LIMIT"] = "0"
		conn, db := e.clickhouseDB()
		ctx := context.Background()
		if _, err := schema.Migrate(ctx, conn, db, 0); err != nil {
			b.Fatal(err)
		}
		base := e.startAPI()
		for i := range subs {
			call(b, "POST", base+"/v1/subscriptions", apiAdminKey, map[string]any{"id": fmt.Sprintf("sub_%d", i), "tenant": "acme",
				"url": "https://example.com/hooks", "event_types": []string{"*"}}, nil, http.StatusCreated)
		}
		batch, err := conn.PrepareBatch(ctx, schema.InsertAttempts(db))
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Second)
		epoch := time.Unix(0, 0).UTC()
		outcomes := []string{"success", "success", "success", "success", "success", "success", "success", "success", "retry", "dead"}
		for i := range messages {
			at := now.Add(-time.Duration(i) * 24 * time.Hour / messages)
			o := outcomes[i%len(outcomes)]
			status := uint16(200)
			if o != "success" {
				status = 503
			}
			if err := batch.Append(fmt.Sprintf("att_%d", i), fmt.Sprintf("evt_%d", i), "order.created", fmt.Sprintf("sub_%d", i%subs), "acme",
				uint32(1), o, "", status, float64(i%50), at, "", epoch, at, "ok", ""); err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Send(); err != nil {
			b.Fatal(err)
		}

		jar, _ := cookiejar.New(nil)
		client := &http.Client{Jar: jar}
		get := func(path string) (time.Duration, string) {
			start := time.Now()
			resp, err := client.Get(base + path)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, body)
			}
			return time.Since(start), string(body)
		}
		_, login := get("/ui/login")
		token := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindStringSubmatch(login)
		if token == nil {
			b.Fatal("no CSRF token on the sign-in page")
		}
		if resp, err := client.PostForm(base+"/ui/login", url.Values{"_csrf": {token[1]}, "key": {apiAdminKey}}); err != nil {
			b.Fatal(err)
		} else {
			resp.Body.Close()
		}
		table := "\n| page (100,000 messages) | p50 | max |\n|---|---|---|"
		for _, page := range []string{"/ui/?window=24h", "/ui/?window=7d", "/ui/subscriptions", "/ui/subscriptions/sub_3",
			"/ui/messages", "/ui/messages?status=dead", "/ui/messages/evt_5000", "/ui/dlq", "/ui/operations"} {
			var took []time.Duration
			for range loads {
				d, _ := get(page)
				took = append(took, d)
			}
			slices.Sort(took)
			table += fmt.Sprintf("\n| `%s` | %v | %v |", page, took[len(took)/2].Round(100*time.Microsecond), took[len(took)-1].Round(100*time.Microsecond))
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-p50"+page)
		}
		fmt.Println(table) // b.Log would cut it at ten lines
		e.close()
	}
}
