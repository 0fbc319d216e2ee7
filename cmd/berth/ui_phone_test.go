package main

import (
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/chromedp/chromedp"
)

// At a phone's width (390 px) nothing scrolls sideways: a tool call on a
// 200-character path, a diff of a 300-character line, long words and
// terminal output wrap in their own boxes, with the details shown or not,
// and the sessions list fits too.
func TestUIPhoneWidthNeverScrollsSideways(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	long := strings.Repeat("x", 196) + ".txt"
	id := createSession(t, s, map[string]any{"name": "on-a-phone", "prompt": "write " + long + " some text\nwrite b.txt " + strings.Repeat("z", 300) + "\nrun echo " + strings.Repeat("y", 300)})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.Run(chromedp.EmulateViewport(390, 844))
	tab.WaitFor("the tool calls and the turn's end", `document.querySelectorAll('.ev.tool').length == 3 && `+agentSaid("wrote "+long)+` && `+logHas("turn_ended"))
	fits := func(what string) {
		t.Helper()
		var width int
		tab.Eval(`document.documentElement.scrollWidth`, &width)
		if width > 390 {
			t.Fatalf("%s is %d px wide at a phone's 390: %s", what, width, tooWide(tab))
		}
	}
	fits("the session page")
	shot(t, tab, "phone-long-path")
	tab.Run(browsertest.Click(browsertest.Field("Show details")))
	tab.WaitFor("the details", `document.querySelector('.transcript time').getClientRects().length > 0`)
	fits("the session page with its details")
	tab.Run(browsertest.Click(`//summary[normalize-space(.)="Session details"]`))
	fits("the session page with Session details open")
	tab.Run(chromedp.Navigate("http://" + s.addr + "/"))
	tab.WaitFor("the list", `document.querySelector('tr[data-id]')`)
	fits("the sessions list")
	noPageErrors(t, tab)
}
