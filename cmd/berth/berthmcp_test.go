package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// toolCall is one `mcp berth TOOL JSON` prompt's outcome: the tool call's
// last status and the agent's text (the tool's answer, or "mcp error: …").
type toolCall struct {
	status string
	text   string
}

// berthTool has session id's agent call TOOL of its berth MCP server with
// args, through the demo agent's `mcp` command, and returns the outcome.
func (s *server) berthTool(t *testing.T, id, tool string, args any) toolCall {
	t.Helper()
	raw, _ := json.Marshal(args)
	text := "mcp berth " + tool + " " + string(raw)
	var r berth.TurnResult
	if st, err := s.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]string{"text": text}, &r); st != 200 {
		t.Fatalf("%q = %d %v\n%s", text, st, err, s.log)
	}
	// The turn's answer may come before its last events are readable.
	var title, status, msg string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		title, status, msg = mcpCallOf(s.allEvents(t, id), r.TurnID)
		if status == "completed" || status == "failed" || time.Now().After(deadline) {
			break
		}
	}
	if title != "mcp berth "+tool {
		t.Fatalf("%q: tool call %q, want mcp berth %s (text %q)", text, title, tool, msg)
	}
	return toolCall{status: status, text: r.Text}
}

// ok decodes a completed call's JSON answer into out.
func (c toolCall) ok(t *testing.T, out any) {
	t.Helper()
	if c.status != "completed" {
		t.Fatalf("tool call %s: %q", c.status, c.text)
	}
	if err := json.Unmarshal([]byte(c.text), out); err != nil {
		t.Fatalf("tool answer %q: %v", c.text, err)
	}
}

// refused checks a call failed with the berth error code.
func (c toolCall) refused(t *testing.T, code string) {
	t.Helper()
	if c.status != "failed" || !strings.HasPrefix(c.text, "mcp error: "+code+": ") {
		t.Fatalf("tool call %s %q, want failed with %s", c.status, c.text, code)
	}
}

// createRoot creates a demo session in provider and waits until active.
func (s *server) createRoot(t *testing.T, body map[string]any) berth.Session {
	t.Helper()
	body["agent"] = "demo"
	var sess berth.Session
	if st, err := s.api("POST", "/v1/sessions", body, &sess); st != 201 || sess.State != berth.StateActive {
		t.Fatalf("create %v = %d %v %s %+v\n%s", body, st, err, sess.State, sess.Failure, s.log)
	}
	return sess
}

// providers are the sandbox providers an end-to-end test runs under: host,
// then bwrap and docker when the daemon has them (each a failure under
// BERTH_REQUIRE_INTEGRATION=1 when it does not).
func (s *server) providers(t *testing.T) []string {
	out := []string{berth.SandboxHost}
	for _, p := range []string{berth.SandboxBwrap, berth.SandboxDocker} {
		if slices.Contains(s.health(t).Sandboxes, p) {
			out = append(out, p)
			continue
		}
		t.Run(p, func(t *testing.T) { s.needSandbox(t, p) })
	}
	return out
}

// isolated is bwrap when the daemon has it (a failure under
// BERTH_REQUIRE_INTEGRATION=1 when it does not), else host.
func (s *server) isolated(t *testing.T) string {
	if slices.Contains(s.health(t).Sandboxes, berth.SandboxBwrap) {
		return berth.SandboxBwrap
	}
	t.Run(berth.SandboxBwrap, func(t *testing.T) { s.needSandbox(t, berth.SandboxBwrap) })
	return berth.SandboxHost
}

// needSandbox ends the test unless the daemon has the sandbox provider
// (a failure under BERTH_REQUIRE_INTEGRATION=1, else a skip).
func (s *server) needSandbox(t *testing.T, provider string) {
	t.Helper()
	if h := s.health(t); !slices.Contains(h.Sandboxes, provider) {
		testenv.Missing(t, "sandbox "+provider, "health lists %v", h.Sandboxes)
	}
}

// A parent's agent drives a child through the berth MCP server alone, on
// the host and under bwrap (no network): spawn_child starts it (with its
// first prompt, name and TTL), prompt_child with wait answers the child's
// text, wait_child waits out a slow turn and reads its last message,
// list_children lists it, stop_child stops it. Under a root daemon the
// tools socket belongs to bwrap's host uid alone.
func TestBerthMCPDrivesAChild(t *testing.T) {
	s := startServerEnv(t, t.TempDir(), providerEnv())
	for _, provider := range s.providers(t) {
		t.Run(provider, func(t *testing.T) {
			parent := s.createRoot(t, map[string]any{"sandbox": provider})
			if !parent.BerthTools {
				t.Fatalf("a session created without berth_tools shows berth_tools false")
			}
			var spawned berth.SpawnChildResult
			s.berthTool(t, parent.ID, "spawn_child", map[string]any{"name": "kid", "ttl_seconds": 300, "prompt": "echo first words"}).ok(t, &spawned)
			child := s.session(t, spawned.ChildID)
			if child.ParentID != parent.ID || child.Sandbox.Provider != provider || child.Name != "kid" || child.ExpiresAt == nil {
				t.Fatalf("the child is %+v", child)
			}

			var answer berth.PromptChildResult
			s.berthTool(t, parent.ID, "prompt_child", map[string]any{"child_id": child.ID, "text": "echo hello from the child", "wait": true}).ok(t, &answer)
			if answer.Text != "hello from the child" || answer.StopReason != "end_turn" || answer.TurnID == "" {
				t.Fatalf("prompt_child with wait = %+v", answer)
			}

			// A slow turn, not waited for: wait_child waits it out.
			var started berth.PromptChildResult
			s.berthTool(t, parent.ID, "prompt_child", map[string]any{"child_id": child.ID, "text": "sleep 1500\necho slow answer"}).ok(t, &started)
			if started.Status != "started" || started.Text != "" {
				t.Fatalf("prompt_child without wait = %+v", started)
			}
			var waited berth.WaitChildResult
			s.berthTool(t, parent.ID, "wait_child", map[string]any{"child_id": child.ID, "timeout_seconds": 60}).ok(t, &waited)
			if waited.TimedOut || waited.State != berth.StateActive || waited.Badge != berth.BadgeIdle || !strings.HasSuffix(waited.Text, "slow answer") || waited.StopReason != "end_turn" {
				t.Fatalf("wait_child = %+v", waited)
			}

			var list []berth.ChildInfo
			s.berthTool(t, parent.ID, "list_children", map[string]any{}).ok(t, &list)
			if len(list) != 1 || list[0].ChildID != child.ID || list[0].Name != "kid" || list[0].State != berth.StateActive {
				t.Fatalf("list_children = %+v", list)
			}

			if provider != berth.SandboxHost && os.Geteuid() == 0 {
				dir := filepath.Join(s.home, "run", "mcp-"+parent.ID)
				for p, mode := range map[string]os.FileMode{dir: os.ModeDir | 0o500, filepath.Join(dir, "s"): os.ModeSocket | 0o600} {
					fi, err := os.Lstat(p)
					if err != nil {
						t.Fatal(err)
					}
					st := fi.Sys().(*syscall.Stat_t)
					if fi.Mode() != mode || st.Uid == 0 || st.Uid != st.Gid {
						t.Fatalf("%s is %v owned by %d:%d, want %v owned by the sandbox's host uid", filepath.Base(p), fi.Mode(), st.Uid, st.Gid, mode)
					}
				}
			}

			var stopped berth.ChildInfo
			s.berthTool(t, parent.ID, "stop_child", map[string]any{"child_id": child.ID}).ok(t, &stopped)
			if stopped.State != berth.StateStopped || s.session(t, child.ID).State != berth.StateStopped {
				t.Fatalf("stop_child = %+v", stopped)
			}
			if _, err := os.Stat(filepath.Join(s.home, "run", "mcp-"+child.ID)); !os.IsNotExist(err) {
				t.Fatalf("the stopped child's tools directory is still there: %v", err)
			}
		})
	}
}

// The tools act only on their session's own subtree: from inside A's
// sandbox, B's child and B itself cannot be prompted, waited on or
// stopped, and are not listed (all not_found, the same as no session at
// all), and nothing of B's changes; A's grandchild is A's to drive, while
// A's child cannot touch A. Bad arguments are refused with
// invalid_argument before they reach the daemon; the API's limits hold
// (max_children).
func TestBerthMCPScopedToItsOwnTree(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[limits]\nmax_depth = 2\nmax_children = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home)
	box := s.isolated(t)
	a := s.createRoot(t, map[string]any{"sandbox": box})
	b := s.createRoot(t, map[string]any{"sandbox": box})
	var bKid berth.Session
	if st, err := s.api("POST", "/v1/sessions/"+b.ID+"/children", map[string]any{"agent": "demo", "ttl_seconds": 300}, &bKid); st != 201 {
		t.Fatalf("spawn B's child = %d %v", st, err)
	}

	for _, target := range []string{bKid.ID, b.ID, a.ID, "ses_01m8zzzzzzzzzzzzzzzzzzzzzz"} {
		s.berthTool(t, a.ID, "prompt_child", map[string]any{"child_id": target, "text": "echo hijacked", "wait": true}).refused(t, berth.ENotFound)
		s.berthTool(t, a.ID, "wait_child", map[string]any{"child_id": target}).refused(t, berth.ENotFound)
		s.berthTool(t, a.ID, "stop_child", map[string]any{"child_id": target}).refused(t, berth.ENotFound)
	}
	var list []berth.ChildInfo
	s.berthTool(t, a.ID, "list_children", map[string]any{}).ok(t, &list)
	if len(list) != 0 {
		t.Fatalf("A lists %+v", list)
	}
	if box == berth.SandboxBwrap {
		// Inside A's sandbox: its own socket, and no other session's.
		var r berth.TurnResult
		run := "run ls -A " + berth.ToolsDir + "; ls " + filepath.Join(home, "run") + " 2>&1 | head -3; echo end"
		s.api("POST", "/v1/sessions/"+a.ID+"/prompts?wait=true", map[string]string{"text": run}, &r)
		if !strings.HasPrefix(r.Text, "s\n") || strings.Contains(r.Text, b.ID) || strings.Contains(r.Text, "mcp-") || !strings.Contains(r.Text, "end") {
			t.Fatalf("inside A's sandbox: %q", r.Text)
		}
	}
	for _, id := range []string{b.ID, bKid.ID} {
		if got := s.session(t, id); got.State != berth.StateActive || got.Turns != 0 {
			t.Fatalf("%s after A's tries: %s with %d turns", id, got.State, got.Turns)
		}
	}

	// A's child, and the child's child: A drives both; the child cannot touch A.
	var kid, grandkid berth.SpawnChildResult
	s.berthTool(t, a.ID, "spawn_child", map[string]any{"ttl_seconds": 300}).ok(t, &kid)
	s.berthTool(t, a.ID, "spawn_child", map[string]any{"ttl_seconds": 300}).refused(t, berth.EConflict)
	s.berthTool(t, kid.ChildID, "spawn_child", map[string]any{"ttl_seconds": 300}).ok(t, &grandkid)
	var answer berth.PromptChildResult
	s.berthTool(t, a.ID, "prompt_child", map[string]any{"child_id": grandkid.ChildID, "text": "echo grand", "wait": true}).ok(t, &answer)
	if answer.Text != "grand" {
		t.Fatalf("A prompting its grandchild = %+v", answer)
	}
	s.berthTool(t, kid.ChildID, "stop_child", map[string]any{"child_id": a.ID}).refused(t, berth.ENotFound)
	s.berthTool(t, kid.ChildID, "spawn_child", map[string]any{"ttl_seconds": 300, "permission_mode": "approve-all"}).refused(t, berth.EForbidden)

	// Bounds, in the input schema.
	s.berthTool(t, a.ID, "spawn_child", map[string]any{"ttl_seconds": 0}).refused(t, berth.EInvalid)
	s.berthTool(t, a.ID, "wait_child", map[string]any{"child_id": kid.ChildID, "timeout_seconds": 99999}).refused(t, berth.EInvalid)
	s.berthTool(t, a.ID, "stop_child", map[string]any{"child_id": kid.ChildID, "force": true}).refused(t, berth.EInvalid)
	if got := s.session(t, a.ID); got.State != berth.StateActive {
		t.Fatalf("A is %s", got.State)
	}
}

// "berth_tools": false gives the agent no berth MCP server: it is shown in
// the Session JSON, kept across a stop and resume, and inherited by the
// session's children; a default session has the server.
func TestBerthToolsFalse(t *testing.T) {
	s := startServer(t, t.TempDir())
	off := s.createRoot(t, map[string]any{"sandbox": "host", "berth_tools": false})
	var shown map[string]any
	s.api("GET", "/v1/sessions/"+off.ID, nil, &shown)
	if shown["berth_tools"] != false {
		t.Fatalf("GET shows berth_tools %v", shown["berth_tools"])
	}
	absent := func(id string) {
		t.Helper()
		var r berth.TurnResult
		s.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]string{"text": "mcp berth list_children {}"}, &r)
		if !strings.Contains(r.Text, `no MCP server named "berth"`) {
			t.Fatalf("session %s's agent answers %q", id, r.Text)
		}
	}
	absent(off.ID)
	var kid berth.Session
	if st, err := s.api("POST", "/v1/sessions/"+off.ID+"/children", map[string]any{"agent": "demo", "ttl_seconds": 300, "berth_tools": true}, &kid); st != 201 || kid.BerthTools {
		t.Fatalf("child = %d %v berth_tools %v", st, err, kid.BerthTools)
	}
	absent(kid.ID)
	if st, _ := s.api("POST", "/v1/sessions/"+off.ID+"/stop", nil, nil); st != 200 {
		t.Fatalf("stop = %d", st)
	}
	var resumed berth.Session
	if st, _ := s.api("POST", "/v1/sessions/"+off.ID+"/resume", nil, &resumed); st != 200 || resumed.BerthTools {
		t.Fatalf("resume = %d berth_tools %v", st, resumed.BerthTools)
	}
	absent(off.ID)

	on := s.createRoot(t, map[string]any{"sandbox": "host"})
	var list []berth.ChildInfo
	s.berthTool(t, on.ID, "list_children", map[string]any{}).ok(t, &list)
}

// The berth tools outlive a daemon SIGKILL: the agents run on in their
// shims with their credentials, the next daemon serves their sockets
// again, and the parent drives its child as before; a stopped parent's
// tools directory is gone.
func TestBerthMCPAfterDaemonRestart(t *testing.T) {
	home := t.TempDir()
	s := startServerEnv(t, home, providerEnv())
	top := t
	for _, provider := range s.providers(t) {
		t.Run(provider, func(t *testing.T) {
			parent := s.createRoot(t, map[string]any{"sandbox": provider})
			var kid berth.SpawnChildResult
			s.berthTool(t, parent.ID, "spawn_child", map[string]any{"ttl_seconds": 300}).ok(t, &kid)

			s.kill9()
			s = startServerAddr(top, home, s.addr, providerEnv())

			var answer berth.PromptChildResult
			s.berthTool(t, parent.ID, "prompt_child", map[string]any{"child_id": kid.ChildID, "text": "echo after the restart", "wait": true}).ok(t, &answer)
			if answer.Text != "after the restart" {
				t.Fatalf("prompt_child after the restart = %+v", answer)
			}
			if st, _ := s.api("POST", "/v1/sessions/"+parent.ID+"/stop", nil, nil); st != 200 {
				t.Fatalf("stop = %d", st)
			}
			deadline := time.Now().Add(10 * time.Second)
			for _, id := range []string{parent.ID, kid.ChildID} {
				for {
					_, err := os.Stat(filepath.Join(home, "run", "mcp-"+id))
					if os.IsNotExist(err) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the tools directory of stopped %s is still there", id)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}
