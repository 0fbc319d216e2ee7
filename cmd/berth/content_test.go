package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// The CLI attaches a workspace file and a local image; the daemon reads
// the file confined to the workspace, the agent answers for each block,
// and the transcript shows them.
func TestPromptFileAndImageFromTheCLI(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.create(t, nil)
	if err := os.WriteFile(filepath.Join(sess.Workspace, "spec.md"), []byte("# spec\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "shot.bin")
	png := append([]byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, make([]byte, 24)...)
	if err := os.WriteFile(img, png, 0o644); err != nil {
		t.Fatal(err)
	}
	out := s.cli(t, "prompt", sess.ID, "echo look", "--file", "spec.md", "--image", img, "--wait")
	for _, w := range []string{"look", "image image/png 32", "resource file://" + filepath.Join(sess.Workspace, "spec.md") + " 7"} {
		if !strings.Contains(out, w) {
			t.Errorf("berth prompt printed %q, want %q in it", out, w)
		}
	}
	var tr struct {
		Turns []berth.TranscriptTurn `json:"turns"`
	}
	s.api("GET", "/v1/sessions/"+sess.ID+"/transcript", nil, &tr)
	if len(tr.Turns) != 1 || len(tr.Turns[0].Content) != 3 || tr.Turns[0].Content[1].Path != "spec.md" {
		t.Fatalf("transcript = %+v", tr.Turns)
	}
	if logs := s.cli(t, "logs", sess.ID); !strings.Contains(logs, "attached=2") {
		t.Errorf("berth logs = %q, want the turn's attachments counted", logs)
	}
	// Not an image, and a file outside the workspace: refused, exit 2 or 1, nothing run.
	if code, msg := s.cliFails(t, "prompt", sess.ID, "--image", filepath.Join(sess.Workspace, "spec.md")); code == 0 || !strings.Contains(msg, "not an image") {
		t.Errorf("--image of a text file: exit %d %q", code, msg)
	}
	if code, msg := s.cliFails(t, "prompt", sess.ID, "--file", "../../etc/passwd"); code == 0 || !strings.Contains(msg, "outside") {
		t.Errorf("--file outside: exit %d %q", code, msg)
	}
	// Both text and content over the API: 400.
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]any{"text": "x",
		"content": []map[string]any{{"type": "text", "text": "y"}}}, nil); st != 400 {
		t.Errorf("text and content = %d, want 400", st)
	}
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]any{
		"content": []map[string]any{{"type": "audio", "mime_type": "audio/wav", "data": "UklGRg=="}}}, nil); st != 400 {
		t.Errorf("audio the demo agent lacks = %d, want 400", st)
	}
	s.api("GET", "/v1/sessions/"+sess.ID+"/transcript", nil, &tr)
	if len(tr.Turns) != 1 {
		t.Errorf("refused prompts ran turns: %+v", tr.Turns)
	}
}

// An agent that wants auth at session/new: the session waits in starting
// with badge needs_auth; `berth authenticate` starts it; `berth clear`
// gives it a new conversation.
func TestAuthenticateAndClearFromTheCLI(t *testing.T) {
	s, sess := authSession(t)
	if sess.State != berth.StateStarting || sess.Badge != berth.BadgeNeedsAuth || !strings.Contains(string(sess.ACP.AuthMethods), "demo-login") {
		t.Fatalf("created %s/%s %s, want starting/needs_auth with demo-login", sess.State, sess.Badge, sess.ACP.AuthMethods)
	}
	if code, msg := s.cliFails(t, "run", "--agent", "demo-auth", "--sandbox", "host", "echo hi"); code != 4 || !strings.Contains(msg, "berth authenticate") || !strings.Contains(msg, "demo-login") {
		t.Errorf("berth run with an agent that wants a login: exit %d %q", code, msg)
	}
	if out := s.cli(t, "show", sess.ID); !strings.Contains(out, "demo-login") {
		t.Errorf("berth show = %q, want the auth methods", out)
	}
	var e struct {
		Error berth.Error `json:"error"`
	}
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/authenticate", map[string]any{"method_id": "nope"}, &e); st != 400 || !strings.Contains(e.Error.Message, "demo-login") {
		t.Errorf("unknown method = %d %+v", st, e)
	}
	if out := s.cli(t, "authenticate", sess.ID, "demo-login"); !strings.Contains(out, "active") {
		t.Fatalf("berth authenticate = %q", out)
	}
	var res berth.TurnResult
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"text": "echo in"}, &res); st != 200 || err != nil || res.Text != "in" {
		t.Fatalf("prompt = %d %v %+v", st, err, res)
	}
	// A prompt answered auth_required: authenticating does not clear
	// needs_auth, so the CLI does not say "authenticated"; a good turn does.
	for _, text := range []string{"logout", "echo out"} {
		s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"text": text}, &res)
	}
	if code, msg := s.cliFails(t, "authenticate", sess.ID, "demo-login"); code != 1 || strings.Contains(msg, "authenticated") ||
		!strings.Contains(msg, "still shows needs_auth") {
		t.Fatalf("berth authenticate while needs_auth: exit %d %q", code, msg)
	}
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"text": "echo in"}, &res); st != 200 || err != nil || res.Text != "in" {
		t.Fatalf("prompt after authenticate = %d %v %+v", st, err, res)
	}
	var before berth.Session
	s.api("GET", "/v1/sessions/"+sess.ID, nil, &before)
	out := s.cli(t, "clear", sess.ID)
	var after berth.Session
	s.api("GET", "/v1/sessions/"+sess.ID, nil, &after)
	if after.ACP.SessionID == before.ACP.SessionID || !strings.Contains(out, after.ACP.SessionID) {
		t.Fatalf("berth clear = %q; conversation %s → %s", out, before.ACP.SessionID, after.ACP.SessionID)
	}
	var page struct {
		Events []berth.Event `json:"events"`
	}
	s.api("GET", "/v1/sessions/"+sess.ID+"/events?type=conversation_cleared", nil, &page)
	if len(page.Events) != 1 || !strings.Contains(string(page.Events[0].Data), before.ACP.SessionID) {
		t.Fatalf("conversation_cleared = %+v", page.Events)
	}
}

// authSession starts a daemon whose agent demo-auth (the demo agent with
// --require-auth) wants authentication at session/new, and creates a
// session of it, which waits for it.
func authSession(t *testing.T) (*server, berth.Session) {
	t.Helper()
	home := t.TempDir()
	writeConfig(t, home, fmt.Sprintf("[[agents]]\nname = \"demo-auth\"\ncommand = %q\nargs = [\"agent-demo\", \"--require-auth\"]\n", bin))
	s := startServer(t, home)
	return s, s.create(t, map[string]any{"agent": "demo-auth"})
}
