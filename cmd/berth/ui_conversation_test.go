package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/chromedp/chromedp"
)

// A session whose agent needs authentication shows the agent's auth
// methods as buttons; one starts it. A content prompt's attachments show
// in the transcript; Clear (confirmed) gives a new conversation.
func TestUIAuthenticateAttachmentsAndClear(t *testing.T) {
	b := browsertest.New(t)
	s, sess := authSession(t)
	tab := uiPage(t, b, s, "/sessions/"+sess.ID)
	tab.WaitFor("the needs_auth badge", `document.querySelector('.session-head .badge').textContent == 'needs_auth'`)
	tab.WaitFor("the auth method's button", `document.evaluate(`+"`"+browsertest.Button("Authenticate: Demo login")+"`"+`, document, null, 9, null).singleNodeValue`)
	shot(t, tab, "session-needs-auth")
	tab.Run(browsertest.Click(browsertest.Button("Authenticate: Demo login")))
	tab.WaitFor("the idle badge", `document.querySelector('.session-head .badge').textContent == 'idle'`)
	tab.WaitFor("the auth buttons gone", `document.querySelector('.conversation .auth').hidden`)

	png := "iVBORw0KGgoAAAANSUhEUg=="
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"content": []map[string]any{
		{"type": "text", "text": "echo with a picture"}, {"type": "image", "mime_type": "image/png", "data": png}}}, nil); st != 200 || err != nil {
		t.Fatalf("content prompt = %d %v", st, err)
	}
	tab.WaitFor("the attachment in the transcript", `[...document.querySelectorAll('.attachments li')].some(e => e.textContent == 'image image/png (16 bytes)')`)
	tab.WaitFor("the agent's answer", agentSaid("image image/png 16"))

	// A file attached in the prompt box goes as an image block.
	shotFile := filepath.Join(t.TempDir(), "screen.png")
	if err := os.WriteFile(shotFile, append([]byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, make([]byte, 12)...), 0o644); err != nil {
		t.Fatal(err)
	}
	tab.Run(chromedp.SetUploadFiles(browsertest.Field("Attach files"), []string{shotFile}, chromedp.BySearch),
		browsertest.Type(browsertest.Field("Prompt"), "echo attached"), browsertest.Click(browsertest.Button("Send")))
	tab.WaitFor("the answer to the attached image", agentSaid("image image/png 20"))
	tab.WaitFor("the attachment listed", `[...document.querySelectorAll('.attachments li')].some(e => e.textContent == 'image image/png (20 bytes)')`)
	shot(t, tab, "session-attachments")

	tab.Run(browsertest.Click(browsertest.Button("Clear")))
	tab.WaitFor("the confirmation", `!document.querySelector('.conversation .confirm').hidden`)
	tab.Run(browsertest.Click(browsertest.Button("Clear conversation")))
	tab.WaitFor("the cleared note", transcriptHas("Conversation cleared"))
	shot(t, tab, "session-cleared")
	var after berth.Session
	s.api("GET", "/v1/sessions/"+sess.ID, nil, &after)
	if after.ACP.SessionID == "" || after.ACP.SessionID == sess.ACP.SessionID {
		t.Fatalf("acp session %q after clear", after.ACP.SessionID)
	}
	noPageErrors(t, tab)
}
