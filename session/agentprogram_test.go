package session

import (
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// looked up in the session's PATH.
func TestAgentProgramIgnoresTheSessionsPath(t *testing.T) {
	dir := t.TempDir()
	testenv.WriteFile(t, filepath.Join(dir, "node_modules/secret/agent"), "\x7fELF", 0o755)
	m := New(Options{Providers: []berth.SandboxProvider{capsProviders()[berth.SandboxBwrap]}})
	spec := berth.AgentSpec{Name: "a", Command: "agent"}
	s := &berth.Session{ID: "ses_x", Sandbox: berth.SandboxSpec{Provider: berth.SandboxBwrap},
		Env: map[string]string{"PATH": filepath.Join(dir, "node_modules/secret")}}
	if p := m.place.agentProgram(s, spec); p.Path != "agent" || len(p.Binds) != 0 {
		t.Fatalf("resolved from the session's PATH: %+v", p)
	}
	spec.Env = map[string]string{"PATH": filepath.Join(dir, "node_modules/secret")}
	if p := m.place.agentProgram(s, spec); len(p.Binds) != 1 || p.Binds[0].Source != filepath.Join(dir, "node_modules/secret") {
		t.Fatalf("not resolved from the catalog's PATH: %+v", p)
	}
}
