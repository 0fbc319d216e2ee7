package demoagent

import (
	"errors"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

func TestContentAnswersAndCapabilities(t *testing.T) {
	h := start(t)
	caps := h.initialize().AgentCapabilities.PromptCapabilities
	if !caps.Image || !caps.EmbeddedContext || caps.Audio {
		t.Fatalf("promptCapabilities = %+v, want image and embeddedContext, not audio", caps)
	}
	sid := h.newSession()
	blob := "AAECAw=="
	mime := "text/plain"
	_, err := h.conn.Prompt(ctxT(t), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{
		acp.TextBlock("echo done"),
		acp.ImageBlock("iVBORw0KGgo=", "image/png"),
		{Resource: &acp.ContentBlockResource{Type: "resource", Resource: acp.EmbeddedResourceResource{
			TextResourceContents: &acp.TextResourceContents{Uri: "file:///w/a.txt", Text: "hello", MimeType: &mime}}}},
		{Resource: &acp.ContentBlockResource{Type: "resource", Resource: acp.EmbeddedResourceResource{
			BlobResourceContents: &acp.BlobResourceContents{Uri: "file:///w/b.bin", Blob: blob}}}},
		acp.ResourceLinkBlock("x.md", "https://example.com/x.md"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := "image image/png 8\nresource file:///w/a.txt 5\nresource file:///w/b.bin 4\nresource_link https://example.com/x.md\ndone"
	if got := h.messages(sid); got != want {
		t.Errorf("messages = %q, want %q", got, want)
	}
}

func TestRequireAuth(t *testing.T) {
	h := start(t, "--require-auth")
	init := h.initialize()
	if len(init.AuthMethods) != 1 || init.AuthMethods[0].Agent == nil || init.AuthMethods[0].Agent.Id != "demo-login" {
		t.Fatalf("authMethods = %#v", init.AuthMethods)
	}
	_, err := h.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: h.root, McpServers: []acp.McpServer{}})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != codeAuthRequired {
		t.Fatalf("session/new before authenticate = %v, want auth_required", err)
	}
	if _, err := h.conn.Authenticate(ctxT(t), acp.AuthenticateRequest{MethodId: "other"}); err == nil {
		t.Fatal("authenticate with an unknown method succeeded")
	}
	if _, err := h.conn.Authenticate(ctxT(t), acp.AuthenticateRequest{MethodId: "demo-login"}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: h.root, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	h.mustPrompt(resp.SessionId, "logout", acp.StopReasonEndTurn)
	_, err = h.prompt(ctxT(t), resp.SessionId, "echo hi")
	if !errors.As(err, &re) || re.Code != codeAuthRequired || !strings.Contains(h.stderr.String()+errString(re), "expired") {
		t.Fatalf("prompt after logout = %v, want auth_required saying the login expired", err)
	}
}

// errString is a request error with its data.
func errString(re *acp.RequestError) string {
	if m, ok := re.Data.(map[string]any); ok {
		s, _ := m["reason"].(string)
		return s
	}
	return ""
}
