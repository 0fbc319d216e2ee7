// Package browsertest drives a headless Chromium (Debian's chromium
// package) from Go tests with chromedp: one browser per test, a tab per
// page, JavaScript exceptions and console errors collected so a test can
// say none happened, and helpers that find controls by their visible or
// accessible name, as a user would.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testenv"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// Timeout bounds every Run: long, because CI runs the race detector on two
// cores beside every other package's tests, where a page's live update
// has been seen to take more than 30 s.
const Timeout = 60 * time.Second

// Browser is one headless Chromium with its own throwaway profile.
type Browser struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// New starts Chromium for t and stops it when t ends. Without chromium on
// the PATH the test is skipped (failed under BERTH_REQUIRE_INTEGRATION=1).
func New(t testing.TB) *Browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Missing(t, "chromium", "%v", err)
	}
	// The profile is removed after the browser is gone (t.TempDir would
	// race with Chromium's last writes).
	profile, err := os.MkdirTemp("", "berth-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		// On a loaded machine Chromium takes longer than chromedp's 20 s
		// to say where its DevTools listen.
		chromedp.WSURLReadTimeout(Timeout),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		// This machine has no network: without these Chromium floods the
		// log with refused connections to Google's services.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp reports CDP events it does not know as errors; they are not.
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled") {
			t.Logf("chromedp: %s", msg)
		}
	}))
	// The first Run starts the browser.
	if err := chromedp.Run(bctx); err != nil {
		bcancel()
		acancel()
		os.RemoveAll(profile)
		t.Fatalf("start chromium: %v", err)
	}
	b := &Browser{ctx: bctx, cancel: func() { bcancel(); acancel(); os.RemoveAll(profile) }}
	t.Cleanup(b.cancel)
	return b
}

// Tab is one browser tab and what went wrong in it.
type Tab struct {
	t      testing.TB
	Ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// Tab opens a new tab, closed when t ends.
func (b *Browser) Tab(t testing.TB) *Tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	tab := &Tab{t: t, Ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			tab.addError("exception: " + e.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				tab.addError("console.error: " + strings.Join(parts, " "))
			}
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	return tab
}

// addError records one problem seen in the page.
func (tab *Tab) addError(s string) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	tab.errors = append(tab.errors, s)
}

// Errors returns the exceptions and console errors seen so far.
func (tab *Tab) Errors() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.errors...)
}

// Run runs actions in the tab within Timeout and fails the test on error.
func (tab *Tab) Run(actions ...chromedp.Action) {
	tab.t.Helper()
	if err := tab.TryRun(actions...); err != nil {
		tab.t.Fatalf("browser: %v (page errors: %v)", err, tab.Errors())
	}
}

// TryRun is Run that returns the error.
func (tab *Tab) TryRun(actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(tab.Ctx, Timeout)
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// Eval evaluates a JavaScript expression and returns its result.
func (tab *Tab) Eval(expr string, out any) {
	tab.t.Helper()
	tab.Run(chromedp.Evaluate(expr, out))
}

// WaitFor polls the JavaScript condition expr until it is true or the
// timeout passes (then the test fails, saying what).
func (tab *Tab) WaitFor(what, expr string) {
	tab.t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		var ok bool
		err := tab.TryRun(chromedp.Evaluate("!!("+expr+")", &ok))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			_ = tab.TryRun(chromedp.Evaluate(`document.body.innerText.slice(-3000)`, &text))
			tab.t.Fatalf("timed out waiting for %s (%s); last error %v; page errors %v; the page ends with:\n%s", what, expr, err, tab.Errors(), text)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Button is the XPath of the enabled or disabled button whose text (its
// accessible name) is name.
func Button(name string) string {
	return fmt.Sprintf(`//button[normalize-space(.)=%s]`, xpathString(name))
}

// Field is the XPath of the form control labelled label (by <label for>).
func Field(label string) string {
	return fmt.Sprintf(`//*[@id=//label[normalize-space(.)=%s]/@for]`, xpathString(label))
}

// Click clicks the first node matching the XPath sel once it is there,
// visible and enabled (looked up afresh each try, so a re-rendered list
// cannot leave it clicking a detached node).
func Click(sel string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		js := fmt.Sprintf(`(() => { const el = document.evaluate(%q, document, null, 9, null).singleNodeValue;
			if (!el || el.disabled || !el.getClientRects().length) return false; el.click(); return true; })()`, sel)
		for {
			var ok bool
			if err := chromedp.Evaluate(js, &ok).Do(ctx); err != nil {
				return err
			}
			if ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("no enabled, visible %s: %w", sel, ctx.Err())
			case <-time.After(25 * time.Millisecond):
			}
		}
	})
}

// Type replaces the value of the control at the XPath sel with text,
// typed key by key.
func Type(sel, text string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.WaitVisible(sel, chromedp.BySearch),
		// Select what is there and delete it, as a user would.
		chromedp.Evaluate(fmt.Sprintf(`(() => { const el = document.evaluate(%q, document, null, 9, null).singleNodeValue; el.focus(); el.select(); return true; })()`, sel), nil),
		chromedp.SendKeys(sel, kb.Backspace+text, chromedp.BySearch),
	}
}

// Select chooses value in the <select> at the XPath sel, as a user's pick
// would (with its input and change events).
func Select(sel, value string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.WaitVisible(sel, chromedp.BySearch),
		chromedp.Evaluate(fmt.Sprintf(`(() => { const el = document.evaluate(%q, document, null, 9, null).singleNodeValue;
			el.value = %q; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); return el.value; })()`, sel, value), nil),
	}
}

// Screenshot saves a PNG of the whole page at path.
func (tab *Tab) Screenshot(path string) {
	tab.t.Helper()
	var png []byte
	tab.Run(chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tab.t.Fatal(err)
	}
}

// MarkWhen makes every page the tab loads from now on record, in
// window.__marks[name], the performance.now() (milliseconds since the
// navigation began) of the first animation frame at which the JavaScript
// condition cond holds: a measure of when the user could see it.
func (tab *Tab) MarkWhen(name, cond string) {
	tab.t.Helper()
	script := fmt.Sprintf(`window.__marks = window.__marks || {};
(function poll() {
  let ok = false;
  try { ok = !!(%s); } catch (e) {}
  if (ok) { window.__marks[%q] = performance.now(); return; }
  requestAnimationFrame(poll);
})();`, cond, name)
	tab.Run(chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(script).Do(ctx)
		return err
	}))
}

// Mark waits for the mark name and returns it in milliseconds.
func (tab *Tab) Mark(name string) float64 {
	tab.t.Helper()
	tab.WaitFor("the mark "+name, fmt.Sprintf(`window.__marks && window.__marks[%q] !== undefined`, name))
	var ms float64
	tab.Eval(fmt.Sprintf(`window.__marks[%q]`, name), &ms)
	return ms
}

// ScreenshotViewport saves a PNG of what the window shows at path.
func (tab *Tab) ScreenshotViewport(path string) {
	tab.t.Helper()
	var png []byte
	tab.Run(chromedp.CaptureScreenshot(&png))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tab.t.Fatal(err)
	}
}

// xpathString quotes s as an XPath string literal.
func xpathString(s string) string {
	if !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	if !strings.Contains(s, "'") {
		return "'" + s + "'"
	}
	return `concat("` + strings.ReplaceAll(s, `"`, `", '"', "`) + `")`
}
