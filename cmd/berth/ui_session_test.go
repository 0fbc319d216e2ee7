package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// inputButtons are the buttons that send something to the session.
var inputButtons = []string{"Send", "Steer", "Interrupt", "Run"}

// buttonsDisabled is the JS expression of the disabled attribute of the
// buttons named names, in order.
func buttonsDisabled(names ...string) string {
	var each []string
	for _, n := range names {
		each = append(each, fmt.Sprintf(`document.evaluate(%q, document, null, 9, null).singleNodeValue.hasAttribute('disabled')`, browsertest.Button(n)))
	}
	return "[" + strings.Join(each, ", ") + "]"
}

// allButtons is the JS condition "every one of the buttons names is
// disabled" (or, with disabled false, enabled).
func allButtons(disabled bool, names ...string) string {
	return fmt.Sprintf(`%s.every(d => d == %v)`, buttonsDisabled(names...), disabled)
}

// pressEnter presses Enter in the focused element as a keyboard does (one
// key down carrying its text, so a handler that prevents it keeps the
// line break out; kb's separate char event would insert it anyway), with
// Shift held when shift.
func pressEnter(shift bool) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var mods input.Modifier
		if shift {
			mods = input.ModifierShift
		}
		down := input.DispatchKeyEvent(input.KeyDown).WithKey("Enter").WithCode("Enter").WithText("\r").WithUnmodifiedText("\r").
			WithWindowsVirtualKeyCode(13).WithNativeVirtualKeyCode(13).WithModifiers(mods)
		if err := down.Do(ctx); err != nil {
			return err
		}
		return input.DispatchKeyEvent(input.KeyUp).WithKey("Enter").WithCode("Enter").
			WithWindowsVirtualKeyCode(13).WithNativeVirtualKeyCode(13).WithModifiers(mods).Do(ctx)
	})
}

// A stopped session says so plainly, with Resume, never that it is
// reconnecting (its stream ends with its last event), and takes no
// input until it is resumed.
func TestUIStoppedSessionSaysSoAndTakesNoInput(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{"prompt": "echo before the stop"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the answer", agentSaid("before the stop"))
	tab.WaitFor("the input enabled", allButtons(false, inputButtons...))
	tab.Run(browsertest.Click(browsertest.Button("Stop")))
	live := `document.querySelector('.session-head .live')`
	// The stream of a stopped session ends: the page sees it down.
	tab.WaitFor("the stopped session's stream down", fmt.Sprintf(`(l => l.dataset.stream == 'down' && l.textContent == 'Stopped — Resume to continue')(%s)`, live))
	var text string
	tab.Eval(`document.body.innerText`, &text)
	if strings.Contains(text, "reconnecting") {
		t.Fatalf("a stopped session's page says it is reconnecting:\n%s", text)
	}
	var disabled []bool
	tab.Eval(buttonsDisabled(inputButtons...), &disabled)
	for i, d := range disabled {
		if !d {
			t.Errorf("%s is enabled on a stopped session", inputButtons[i])
		}
	}
	shot(t, tab, "session-stopped")
	tab.Run(browsertest.Click(browsertest.Button("Resume")))
	tab.WaitFor("the idle badge", `document.querySelector('.session-head .badge').textContent == 'idle'`)
	tab.WaitFor("the input enabled again", allButtons(false, inputButtons...))
	tab.WaitFor("no stopped line", live+`.textContent == ''`)
	tab.Run(browsertest.Type(browsertest.Field("Prompt"), "echo after the resume"), browsertest.Click(browsertest.Button("Send")))
	tab.WaitFor("the answer after the resume", agentSaid("after the resume"))
	noPageErrors(t, tab)
}

// Enter sends, as in chat apps; Shift+Enter adds a line, and an Enter
// that ends an IME composition sends nothing. The box says so.
func TestUIEnterSendsShiftEnterAddsALine(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("Send enabled", allButtons(false, "Send"))
	tab.WaitFor("the hint", `(h => h.textContent.includes('Enter sends') && h.textContent.includes('Shift+Enter adds a line'))(document.getElementById('prompt-hint'))`)
	tab.Run(browsertest.Type(browsertest.Field("Prompt"), "echo first line"),
		pressEnter(true), chromedp.KeyEvent("more"))
	var value string
	tab.Eval(`document.getElementById('prompt').value`, &value)
	if value != "echo first line\nmore" {
		t.Fatalf("after Shift+Enter the box holds %q", value)
	}
	var notPrevented bool
	tab.Eval(`document.getElementById('prompt').dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', isComposing: true, bubbles: true, cancelable: true}))`, &notPrevented)
	if !notPrevented {
		t.Fatal("an Enter that ends an IME composition was taken as Send")
	}
	if n := s.session(t, id).Turns; n != 0 {
		t.Fatalf("%d turns before Enter was pressed", n)
	}
	tab.Run(pressEnter(false))
	tab.WaitFor("the answer", agentSaid("first line")+" && "+agentSaid("more"))
	tab.WaitFor("the box emptied", `document.getElementById('prompt').value == ''`)
	tab.WaitFor("the idle badge", `document.querySelector('.session-head .badge').textContent == 'idle'`)
	var texts []string
	for _, ev := range s.allEvents(t, id) {
		if ev.Type == "turn_started" {
			texts = append(texts, string(ev.Data))
		}
	}
	if len(texts) != 1 || !strings.Contains(texts[0], `"echo first line\nmore"`) {
		t.Fatalf("the turns started: %v, want the one prompt of two lines", texts)
	}
	noPageErrors(t, tab)
}

// The session header is one or two lines on a desktop screen (at most a
// sixth of its height); the workspace, the sandbox and the ids are behind
// Session details.
func TestUISessionHeaderIsCompact(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{"name": "a-session-with-a-header", "prompt": "echo hello"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.Run(chromedp.EmulateViewport(1280, 800))
	tab.WaitFor("the session and its controls", agentSaid("hello")+` && document.querySelector('#ctl-mode')`)
	var height float64
	tab.Eval(`document.querySelector('.session-head').getBoundingClientRect().height`, &height)
	t.Logf("the header is %.0f px high", height)
	if height > 800.0/6 {
		t.Fatalf("the header is %.0f px high on a 1280×800 screen, more than a sixth of it", height)
	}
	workspace := `(dt => dt.checkVisibility())([...document.querySelectorAll('.session-head dt')].find(dt => dt.textContent == 'Workspace'))`
	var shown bool
	if tab.Eval(workspace, &shown); shown {
		t.Fatal("the workspace shows without Session details")
	}
	tab.Run(browsertest.Click(`//summary[normalize-space(.)="Session details"]`))
	tab.WaitFor("the workspace in the details", workspace)
	noPageErrors(t, tab)
}
