package api

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

// createAtOnce sends bodies as creates at once from as many clients and
// returns the statuses and bodies of the answers.
func createAtOnce(t *testing.T, r *replica, bodies []string) (statuses []int, answers []string) {
	t.Helper()
	statuses, answers = make([]int, len(bodies)), make([]string, len(bodies))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/subscriptions", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+adminKey)
			<-start
			resp, err := r.srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			statuses[i], answers[i] = resp.StatusCode, string(b)
		})
	}
	close(start)
	wg.Wait()
	return statuses, answers
}

// TestConcurrentCreatesOfOneID: creates of one id racing on one replica
// give one 201 and 409s, and the subscription read back is the one
// created; without the claim on the id each would find it free.
func TestConcurrentCreatesOfOneID(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	bodies := make([]string, 16)
	for i := range bodies {
		bodies[i] = `{"id":"sub_race","url":"https://a` + string(rune('a'+i)) + `.example/","event_types":["*"]}`
	}
	statuses, answers := createAtOnce(t, r, bodies)
	var created service.Subscription
	for i, status := range statuses {
		switch status {
		case http.StatusCreated:
			if created.ID != "" {
				t.Fatalf("two creates of sub_race answered 201: %s and %s", created.URL, answers[i])
			}
			if err := json.Unmarshal([]byte(answers[i]), &created); err != nil {
				t.Fatal(err)
			}
		case http.StatusConflict:
		default:
			t.Fatalf("create %d: %d %s, want 201 or 409", i, status, answers[i])
		}
	}
	if created.ID == "" {
		t.Fatal("no create of sub_race answered 201")
	}
	var got service.Subscription
	r.must(http.StatusOK, "GET", "/v1/subscriptions/sub_race", adminKey, nil, &got)
	if got.URL != created.URL {
		t.Fatalf("read back %s, the 201 was for %s", got.URL, created.URL)
	}
	if n := len(c.records(c.names.Subscriptions())); n != 1 {
		t.Fatalf("%d records on the subscriptions topic, want the one created", n)
	}
}

// TestConcurrentCreatesKeepTheQuota: creates of one tenant racing on one
// replica pass its limit never, whatever the table showed when each began.
func TestConcurrentCreatesKeepTheQuota(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	env := maps.Clone(c.env)
	env["WEBHOOKS_TENANT_MAX_SUBSCRIPTIONS"] = "3"
	r := c.replicaWith(env)
	bodies := make([]string, 16)
	for i := range bodies {
		bodies[i] = `{"url":"https://a.example/","event_types":["*"],"tenant":"acme"}`
	}
	statuses, answers := createAtOnce(t, r, bodies)
	created := 0
	for i, status := range statuses {
		switch status {
		case http.StatusCreated:
			created++
		case http.StatusUnprocessableEntity:
			if !strings.Contains(answers[i], "its limit") {
				t.Fatalf("refusal: %s", answers[i])
			}
		default:
			t.Fatalf("create %d: %d %s, want 201 or 422", i, status, answers[i])
		}
	}
	if created != 3 {
		t.Fatalf("%d creates of tenant acme answered 201, want its limit, 3", created)
	}
	var page struct {
		Data []service.Subscription `json:"data"`
	}
	r.must(http.StatusOK, "GET", "/v1/subscriptions?tenant=acme", adminKey, nil, &page)
	if len(page.Data) != 3 {
		t.Fatalf("tenant acme lists %d subscriptions, want 3", len(page.Data))
	}
}
