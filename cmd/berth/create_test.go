package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// berth create takes every option of the create body; -q prints the id
// alone; a bad KEY=VALUE is a usage error (exit 2) that creates nothing.
func TestCreateCommand(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	ws := t.TempDir()
	out, code := s.run(t, "create", "-q", "--agent", "demo", "--name", "made-by-cli", "--workspace", ws, "--sandbox", "host",
		"--permissions", "deny-all", "--env", "GREETING=hi", "--label", "team=infra", "--label", "tier=1", "--ttl", "2h", "--idle-timeout", "90s",
		"--prompt", "echo first")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "ses_") || strings.ContainsAny(id, " \n") {
		t.Fatalf("create -q: exit %d, %q", code, out)
	}
	var got berth.Session
	if st, err := s.api("GET", "/v1/sessions/"+id, nil, &got); st != 200 {
		t.Fatalf("GET: %d %v", st, err)
	}
	if got.Name != "made-by-cli" || got.Workspace != ws || got.Sandbox.Provider != "host" || got.PermissionMode != "deny-all" ||
		got.Labels["team"] != "infra" || got.IdleTimeoutSeconds != 90 || got.Labels["tier"] != "1" || got.ExpiresAt == nil || got.ExpiresAt.Sub(got.CreatedAt).Round(time.Minute) != 2*time.Hour {
		t.Errorf("the session does not carry the flags: %+v", got)
	}
	// The first prompt ran.
	s.waitLog(t, id, "the first prompt's answer", func(evs []berth.Event) bool {
		for _, e := range evs {
			if e.Type == "agent_message" && strings.Contains(string(e.Data), "first") {
				return true
			}
		}
		return false
	})

	var before berth.SessionPage
	s.api("GET", "/v1/sessions", nil, &before)
	if out, code := s.run(t, "create", "--env", "NOEQUALS"); code != 2 || !strings.Contains(out, "--env wants KEY=VALUE") {
		t.Errorf("bad --env: exit %d, %q", code, out)
	}
	var after berth.SessionPage
	s.api("GET", "/v1/sessions", nil, &after)
	if len(after.Sessions) != len(before.Sessions) {
		t.Errorf("a refused create made a session: %d → %d", len(before.Sessions), len(after.Sessions))
	}
	// Without -q it prints the session as show does.
	if out, code := s.run(t, "create", "--sandbox", "host"); code != 0 || !strings.Contains(out, "id:") || !strings.Contains(out, "agent:") {
		t.Errorf("create: exit %d, %q", code, out)
	}
}

// An unknown agent's error lists the daemon's agents; a workspace that is
// not there says which path and why.
func TestCreateErrorsSayWhatIsThere(t *testing.T) {
	s := startServer(t, t.TempDir())
	if code, out := s.cliFails(t, "create", "--agent", "nope"); code != 1 || !strings.Contains(out, `unknown agent "nope": this daemon has `) ||
		!strings.Contains(out, "demo") {
		t.Errorf("create --agent nope: exit %d, %q", code, out)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for ws, want := range map[string]string{
		filepath.Join(dir, "gone", "deeper"): fmt.Sprintf("workspace %q: %s does not exist", filepath.Join(dir, "gone", "deeper"), filepath.Join(dir, "gone")),
		filepath.Join(dir, "gone"):           fmt.Sprintf("workspace %q does not exist", filepath.Join(dir, "gone")),
		file:                                 fmt.Sprintf("workspace %q is not a directory", file),
		filepath.Join(file, "sub"):           fmt.Sprintf("workspace %q: %s is not a directory", filepath.Join(file, "sub"), file),
	} {
		if code, out := s.cliFails(t, "create", "--workspace", ws); code != 1 || !strings.Contains(out, want) {
			t.Errorf("create --workspace %s: exit %d, %q, want %q", ws, code, out, want)
		}
	}
}
