package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// browser is a headless Chromium (Debian's chromium) for ctx's lifetime.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		testkit.NeedService(t, "no chromium on PATH (make deps installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(cancelCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	return ctx
}

// screenshot writes the page as name.png under .build/screenshots at the
// repository's root.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", ".build", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReferencePageInBrowser: /docs, in a real browser, renders every
// operation of the OpenAPI document from the API's own assets, under a
// Content-Security-Policy that allows no other origin.
func TestReferencePageInBrowser(t *testing.T) {
	if _, err := assets.Open(swaggerUI + "/swagger-ui-bundle.js"); err != nil {
		testkit.NeedService(t, "the API was built without its assets (make assets)")
	}
	ctx := browser(t)
	s := New(Config{}, nil, nil, nil, nil, ops.NewRegistry(), testkit.Logger(t))
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
	screenshot(ctx, t, "api-reference")
}
