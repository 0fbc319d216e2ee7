package http

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

func TestQueueRoutes(t *testing.T) {
	f := newFakeService()
	f.queue = []*berth.QueueEntry{{ID: "entry_1", SessionID: "ses_1", Kind: berth.EntryQueue, Text: "hi",
		State: berth.EntryPending, Position: 1, CreatedAt: time.Unix(1, 0).UTC()}}
	h := NewServer(f, ServerOptions{}).Handler()

	code, body, _ := call(t, h, "GET", "/v1/sessions/ses_1/queue", "")
	entries, _ := body["entries"].([]any)
	if code != http.StatusOK || len(entries) != 1 || body["generation"] != 3.0 {
		t.Fatalf("GET queue: %d %v", code, body)
	}
	if e := entries[0].(map[string]any); e["id"] != "entry_1" || e["position"] != 1.0 || e["text"] != "hi" {
		t.Fatalf("entry: %v", e)
	}
	code, body, _ = call(t, h, "DELETE", "/v1/sessions/ses_1/queue/entry_1", "")
	if code != http.StatusOK || body["status"] != "canceled" {
		t.Fatalf("DELETE entry: %d %v", code, body)
	}
	code, body, _ = call(t, h, "DELETE", "/v1/sessions/ses_1/queue/entry_1", "")
	if code != http.StatusNotFound || errCode(t, body) != berth.ENotFound {
		t.Fatalf("DELETE again: %d %v", code, body)
	}
	code, body, _ = call(t, h, "GET", "/v1/sessions/ses_1/queue", "")
	if entries, ok := body["entries"].([]any); code != http.StatusOK || !ok || len(entries) != 0 {
		t.Fatalf("empty queue is not an empty array: %d %v", code, body)
	}
	code, _, _ = call(t, h, "GET", "/v1/sessions/nope/queue", "")
	if code != http.StatusNotFound {
		t.Fatalf("queue of an unknown session: %d", code)
	}
}

func TestPermissionRoutes(t *testing.T) {
	f := newFakeService()
	f.perms = []*berth.Permission{{ID: "perm_1", SessionID: "ses_1", State: berth.PermissionPending, ToolCall: json.RawMessage(`{"title":"rm"}`),
		Options: []berth.PermissionOption{{ID: "allow", Name: "Allow", Kind: "allow_once"}}}}
	h := NewServer(f, ServerOptions{}).Handler()

	code, body, _ := call(t, h, "GET", "/v1/sessions/ses_1/permissions?state=pending", "")
	if ps, _ := body["permissions"].([]any); code != http.StatusOK || len(ps) != 1 {
		t.Fatalf("GET pending: %d %v", code, body)
	}
	for _, bad := range []string{`{}`, `{"decision":"maybe"}`, `{"option_id":"a","decision":"allow_once"}`, `{"Decision":"allow_once"}`, `{"option":"x"}`} {
		code, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/permissions/perm_1", bad)
		if code != http.StatusBadRequest || errCode(t, body) != berth.EInvalid {
			t.Fatalf("decide %s: %d %v", bad, code, body)
		}
	}
	code, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/permissions/perm_1", `{"decision":"allow_once"}`)
	if code != http.StatusOK || body["state"] != berth.PermissionDecided || f.lastDecision.Decision != "allow_once" {
		t.Fatalf("decide: %d %v", code, body)
	}
	code, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/permissions/perm_1", `{"option_id":"allow"}`)
	if code != http.StatusConflict || errCode(t, body) != berth.EConflict {
		t.Fatalf("second decision: %d %v", code, body)
	}
	code, body, _ = call(t, h, "GET", "/v1/sessions/ses_1/permissions?state=pending", "")
	if ps, ok := body["permissions"].([]any); code != http.StatusOK || !ok || len(ps) != 0 {
		t.Fatalf("no pending left is not an empty array: %d %v", code, body)
	}
}

func TestResumeRoute(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{}).Handler()
	code, body, _ := call(t, h, "POST", "/v1/sessions/ses_1/resume", "")
	if code != http.StatusOK || body["state"] != "active" {
		t.Fatalf("resume: %d %v", code, body)
	}
	code, _, _ = call(t, h, "POST", "/v1/sessions/nope/resume", "")
	if code != http.StatusNotFound {
		t.Fatalf("resume unknown: %d", code)
	}
}

func TestExecRoute(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	code, body, _ := call(t, h, "POST", "/v1/sessions/ses_1/exec", `{"command":["echo","hi"],"timeout_seconds":5}`)
	if code != http.StatusOK || body["exit_code"] != 3.0 || body["stdout"] != "echo hi" || body["timed_out"] != false {
		t.Fatalf("exec: %d %v", code, body)
	}
	for _, bad := range []string{`{}`, `{"command":[]}`, `{"command":["x"],"timeout_seconds":99999}`, `{"command":"ls"}`, `{"command":["x"],"env":{"A=B":"c"}}`} {
		code, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/exec", bad)
		if code != http.StatusBadRequest || errCode(t, body) != berth.EInvalid {
			t.Fatalf("exec %s: %d %v", bad, code, body)
		}
	}
}

func TestSnapshotRoutes(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	code, body, _ := call(t, h, "POST", "/v1/sessions/ses_1/snapshots", "")
	if code != http.StatusCreated || body["id"] != "snap_1" || body["size_bytes"] != 42.0 || body["created_at"] == nil {
		t.Fatalf("create: %d %v", code, body)
	}
	code, body, _ = call(t, h, "GET", "/v1/sessions/ses_1/snapshots", "")
	if list, ok := body["snapshots"].([]any); code != http.StatusOK || !ok || len(list) != 0 {
		t.Fatalf("list: %d %v", code, body)
	}
	if code, _, _ = call(t, h, "POST", "/v1/sessions/nope/snapshots", ""); code != http.StatusNotFound {
		t.Fatalf("unknown session: %d", code)
	}
}

func TestRepairRoute(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	code, body, _ := call(t, h, "POST", "/v1/sessions/ses_1/repair?dry_run=true&force=true", "")
	issues, _ := body["issues"].([]any)
	if code != http.StatusOK || body["persisted"] != false || len(issues) != 1 || issues[0].(map[string]any)["message"] != "true true" {
		t.Fatalf("repair: %d %v", code, body)
	}
	if code, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/repair?dry_run=maybe", ""); code != http.StatusBadRequest {
		t.Fatalf("bad dry_run: %d %v", code, body)
	}
}
