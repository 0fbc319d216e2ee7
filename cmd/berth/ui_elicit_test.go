package main

import (
	"fmt"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
)

// elicButton is the XPath of a button of the elicitation card.
func elicButton(name string) string {
	return `//div[contains(@class,"elic-card")]` + browsertest.Button(name)
}

func TestUIAnswersAnElicitationFromItsForm(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{"prompt": "elicit What should I call you?"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the question's form", `document.querySelector('.elic-card button:not([disabled])')`)
	for _, name := range []string{"Submit", "Decline", "Cancel"} {
		tab.WaitFor("the button "+name, fmt.Sprintf(`document.evaluate(%q, document, null, 9, null).singleNodeValue`, elicButton(name)))
	}
	tab.WaitFor("the waiting badge", `document.querySelector('.session-head .badge').textContent == 'waiting'`)

	// Submitting the empty form is refused by the daemon, naming the field;
	// the form stays usable.
	tab.Run(browsertest.Click(elicButton("Submit")))
	tab.WaitFor("the refusal", `(document.querySelector('.elic-card .elic-status')||{textContent:''}).textContent.includes('content.answer')`)
	// The field is labelled with the schema's title.
	tab.Run(browsertest.Type(browsertest.Field("Answer"), "Ada"))
	shot(t, tab, "elicitation")
	tab.Run(browsertest.Click(elicButton("Submit")))
	tab.WaitFor("the card answered", `document.querySelector('.elic-card.decided')`)
	tab.WaitFor("the agent's use of the answer", agentSaid("answer: Ada"))
	tab.WaitFor("the turn's end", logHas("turn_ended"))

	// Decline on the next one.
	tab.Run(browsertest.Type(browsertest.Field("Prompt"), "elicit Shall I go on?"), browsertest.Click(browsertest.Button("Send")))
	tab.WaitFor("the second form", `document.querySelectorAll('.elic-card').length == 2 && document.querySelector('.elic-card:not(.decided) button:not([disabled])')`)
	tab.Run(browsertest.Click(`//div[contains(@class,"elic-card")][not(contains(@class,"decided"))]` + browsertest.Button("Decline")))
	tab.WaitFor("the agent told", agentSaid("elicitation decline"))

	var after struct {
		Elicitations []struct{ State, DecidedBy string } `json:"elicitations"`
	}
	s.api("GET", "/v1/sessions/"+id+"/elicitations", nil, &after)
	if len(after.Elicitations) != 2 || after.Elicitations[0].State != "accepted" || after.Elicitations[1].State != "declined" {
		t.Fatalf("elicitations after the clicks: %+v", after)
	}
	noPageErrors(t, tab)
}
