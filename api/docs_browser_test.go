package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/browsertest"
)

// TestReferencePageInBrowser: /docs, in a real browser, renders every
// operation of the OpenAPI document from the API's own assets, under a
// Content-Security-Policy that allows no other origin.
func TestReferencePageInBrowser(t *testing.T) {
	if _, err := assets.Open(swaggerUI + "/swagger-ui-bundle.js"); err != nil {
		testkit.NeedService(t, "the API was built without its assets (make assets)")
	}
	ctx := browsertest.New(t, "assets/dist")
	s := New(Options{Registerer: ops.NewRegistry(), Log: testkit.Logger(t)})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "http") {
		t.Fatalf("Content-Security-Policy %q: want scripts of the API's origin only", csp)
	}
	want := 0
	for _, item := range s.OpenAPI().Paths {
		for _, o := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if o != nil {
				want++
			}
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/docs"), chromedp.WaitVisible(chromedp.CSS(".opblock"))); err != nil {
		t.Fatalf("the reference page did not render: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".opblock").length`))
	if err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".info .title")))
	if err != nil {
		t.Fatal(err)
	}
	if got != want || !strings.Contains(title, "hookpipe API") {
		t.Fatalf("the reference shows %d operations titled %q, want %d of hookpipe API", got, title, want)
	}
	browsertest.NoCSPViolations(ctx, t, "reference page")
	browsertest.Screenshot(ctx, t, "api-reference")
}
