// Package browsertest drives a real headless Chromium (Debian's chromium)
// from tests, with chromedp: the dashboard's and the API reference's
// browser tests.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// New starts a headless Chromium for tb's lifetime (90 s at most) and
// returns its context, every page it opens recording what its
// Content-Security-Policy refused (see NoCSPViolations). Without chromium
// on PATH, tb is skipped, or failed under make test. assets is the
// directory of the front-end assets the pages embed (api/assets/dist);
// without them (never built: `make assets`) tb fails at once, where the
// pages would load without their scripts and a wait time out.
func New(tb testing.TB, assets string) context.Context {
	tb.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		testkit.NeedService(tb, "no chromium on PATH (make deps installs it)")
	}
	if _, err := os.Stat(filepath.Join(assets, "htmx.org")); err != nil {
		tb.Fatalf("the pages' front-end assets are not built (%v): run `make assets` (make test does), then test again", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(tb.TempDir()))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	tb.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	tb.Cleanup(cancelCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	tb.Cleanup(cancelTimeout)
	Do(ctx, tb, "watching the Content-Security-Policy", watchCSP)
	return ctx
}

// watchCSP records, in every page the browser opens, what the
// Content-Security-Policy refused (window.cspViolations).
var watchCSP chromedp.Action[chromedp.Void] = func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
	_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.cspViolations = []; document.addEventListener("securitypolicyviolation",
			e => window.cspViolations.push(e.violatedDirective + " " + e.blockedURI));`,
	})
	return chromedp.Void{}, err
}

// Do runs steps, failing tb with what.
func Do(ctx context.Context, tb testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
}

// Text is the text of the first element the CSS selector sel matches.
func Text(ctx context.Context, tb testing.TB, sel string) string {
	tb.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		tb.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// Polled is the text of the element sel matches, "" when none does: for
// conditions polled while the page swaps that element (an htmx refresh
// replaces it, and for a moment it is not there), where Text would fail.
func Polled(ctx context.Context, tb testing.TB, sel string) string {
	tb.Helper()
	return Eval[string](ctx, tb, fmt.Sprintf(`document.querySelector(%q)?.textContent.trim() ?? ""`, sel))
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](ctx context.Context, tb testing.TB, expr string) T {
	tb.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.Fatalf("%s: %v", expr, err)
	}
	return v
}

// NoCSPViolations fails tb when the page broke its Content-Security-Policy.
func NoCSPViolations(ctx context.Context, tb testing.TB, where string) {
	tb.Helper()
	if got := Eval[[]string](ctx, tb, `window.cspViolations || []`); len(got) > 0 {
		tb.Errorf("%s: the Content-Security-Policy refused %v", where, got)
	}
}

// Screenshot writes the page as name.png under .build/screenshots at the
// repository's root (the directory of go.work, above the test's).
func Screenshot(ctx context.Context, tb testing.TB, name string) {
	tb.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
	out := filepath.Join(dir, ".build", "screenshots")
	if err := os.MkdirAll(out, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, name+".png"), png, 0o644); err != nil {
		tb.Fatal(err)
	}
}
