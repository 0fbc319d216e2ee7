package main

import (
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/browsertest"
)

func TestUIAgentControlsPickersAndCommands(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the Mode picker", `document.querySelector('#ctl-mode') && document.querySelector('#ctl-mode').value == 'default'`)
	tab.Run(browsertest.Select(browsertest.Field("Mode"), "plan"))
	tab.WaitFor("the mode change in the transcript", transcriptHas("Mode: plan (set by user)"))
	tab.Run(browsertest.Select(browsertest.Field("Model"), "demo-large"))
	tab.WaitFor("the model change in the transcript", transcriptHas("Config: model=demo-large"))
	tab.Run(browsertest.Select(browsertest.Field("Verbosity"), "high"))
	tab.WaitFor("the verbosity change in the transcript", transcriptHas("Config: verbosity=high"))
	var got berth.Session
	if st, err := s.api("GET", "/v1/sessions/"+id, nil, &got); st != 200 || err != nil {
		t.Fatalf("get = %d %v", st, err)
	}
	if got.ACP.Modes.Current != "plan" || got.ACP.Models.Current != "demo-large" || got.ACP.ConfigOptions[1].CurrentString() != "high" {
		t.Fatalf("the pickers did not set the session's controls: %+v %+v %+v", got.ACP.Modes, got.ACP.Models, got.ACP.ConfigOptions)
	}
	// The agent's own change moves the picker.
	tab.Run(browsertest.Type(browsertest.Field("Prompt"), "mode"), browsertest.Click(browsertest.Button("Send")))
	tab.WaitFor("the agent's answer", agentSaid("mode: plan"))

	// A command puts "/name " in the Prompt box.
	tab.WaitFor("the commands", `[...document.querySelectorAll('[aria-label=Commands] button')].map(b => b.textContent).join(' ') == '/echo /plan'`)
	tab.Run(browsertest.Click(browsertest.Button("/echo")))
	tab.WaitFor("the command in the Prompt box", `document.querySelector('#prompt').value == '/echo ' && document.activeElement.id == 'prompt'`)
	shot(t, tab, "session-controls")
	noPageErrors(t, tab)
}
