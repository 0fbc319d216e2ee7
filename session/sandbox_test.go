package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

func TestNetworkPolicy(t *testing.T) {
	needy := catalog()["demo"]
	needy.Name, needy.Network = "needy", true
	e := newEnv(t, withAgents(needy), func(o *Options) { o.Sandbox.AllowNetwork = false })
	ctx := context.Background()
	// Asking for the network against policy is refused, nothing stored.
	if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Network: true}); !berth.IsCode(err, berth.EForbidden) {
		t.Fatalf("network against policy = %v, want permission_denied", err)
	}
	// An agent that needs it runs without, and the session says why.
	s := e.create(berth.CreateRequest{Agent: "needy"})
	if s.Sandbox.Network {
		t.Fatal("the session got the network against policy")
	}
	warned := false
	for _, ev := range ofType(e.events(s.ID), berth.EventRuntimeWarning) {
		warned = warned || strings.Contains(string(ev.Data), "allow_network is false")
	}
	if !warned {
		t.Fatalf("no runtime_warning: %v", types(e.events(s.ID)))
	}

	// Where policy allows, a needy agent gets the network without asking.
	open := newEnv(t, withAgents(needy))
	if s := open.create(berth.CreateRequest{Agent: "needy"}); !s.Sandbox.Network {
		t.Fatal("a needy agent got no network where policy allows it")
	}
}

func TestSandboxBindsTheAgentAndItsHomeFiles(t *testing.T) {
	user := t.TempDir()
	for _, f := range []string{".tool/auth.json", ".cfg/dir/x"} {
		p := filepath.Join(user, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := New(Options{UserHome: user})
	spec := berth.AgentSpec{Command: "/opt/agents/bin/agent", HomeFiles: []string{".tool/auth.json", ".cfg/", ".missing", "../escape", "/abs"}}
	got := m.sandboxBinds(spec, "/h")
	want := []berth.Bind{{Source: "/opt/agents/bin/agent", Target: "/opt/agents/bin/agent"},
		{Source: filepath.Join(user, ".tool/auth.json"), Target: "/h/.tool/auth.json"},
		{Source: filepath.Join(user, ".cfg"), Target: "/h/.cfg"}}
	if len(got) != len(want) {
		t.Fatalf("binds = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bind %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if b := m.sandboxBinds(berth.AgentSpec{Command: "/usr/bin/gemini"}, "/h"); len(b) != 0 {
		t.Fatalf("a system program is bound: %+v", b)
	}
}
