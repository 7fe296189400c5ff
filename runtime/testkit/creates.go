package testkit

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CreateSubscriptions creates count subscriptions through the API at base
// (POST /v1/subscriptions with key), clients at a time, each client
// keeping its connection as an SDK does; body(i) is the i-th create's
// request body. It returns how long they took; an answer other than 201
// fails tb and stops that client.
func CreateSubscriptions(tb testing.TB, base, key string, clients, count int, body func(i int) string) time.Duration {
	tb.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= count || !create(tb, client, base, key, body(i)) {
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// create posts one subscription and tells whether it was created.
func create(tb testing.TB, client *http.Client, base, key, body string) bool {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/subscriptions", strings.NewReader(body))
	if err != nil {
		tb.Error(err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		tb.Error(err)
		return false
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		tb.Errorf("creating: %d %s", resp.StatusCode, answer)
		return false
	}
	return true
}
