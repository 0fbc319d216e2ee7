package demoagent

import (
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// A client that offers no form elicitation is told so, and elicit without
// a message is a usage line; the answered paths run against berth's own
// client (session and cmd/berth elicitation tests).
func TestElicitWithoutTheCapability(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.mustPrompt(sid, "elicit Your name?\nelicit", acp.StopReasonEndTurn)
	if got, want := h.messages(sid), "elicitation unsupported\nusage: elicit TEXT"; got != want {
		t.Fatalf("messages = %q, want %q", got, want)
	}
}
