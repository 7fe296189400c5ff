package send

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkSendHTTP: deliveries of 1 KiB posted by a Sender from 64
// goroutines to an http:// endpoint in the process that answers 204, as
// the deliverer posts them (the subscription's two headers and the trace
// context). ns/op is the wall time a delivery over the 64; with -cpuprofile,
// what the Sender costs beside the server:
//
//	go test -run '^$' -bench SendHTTP -benchmem -benchtime 20000x ./runtime/send/
func BenchmarkSendHTTP(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	sub := newSub(b, "sub_bench", srv.URL+"/hooks")
	sub.Headers = map[string]string{"X-Tenant": "acme", "X-Team": "payments"}
	if err := sub.Validate(); err != nil {
		b.Fatal(err)
	}
	s := New(loopback, Options{MaxInFlight: benchWorkers, MaxResponseBytes: 1024})
	b.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := sendAll(ctx, s, &sub, "evt_warm_", benchWarm); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := sendAll(ctx, s, &sub, "evt_", b.N); err != nil {
		b.Fatal(err)
	}
}
