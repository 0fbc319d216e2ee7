package session

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

func TestNetworkPolicy(t *testing.T) {
	needy := catalog()["demo"]
	needy.Name, needy.Network = "needy", true
	e := newEnv(t, withAgents(needy), func(o *Options) { o.Sandbox.AllowNetwork = false })
	ctx := context.Background()
	// Asking for the network against policy is refused, nothing stored.
	if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Network: berth.NetworkOf(true)}); !berth.IsCode(err, berth.EForbidden) {
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

// A bwrap sandbox that does not start says why, in the words of the tool
// that failed (here a slirp4netns that cannot set the network up), in the
// session's failure, its session_stopped event and the daemon's log.
func TestSandboxStartFailureSaysWhy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const words = "slirp4netns: cannot open /dev/net/tun"
	fake := filepath.Join(dir, "slirp4netns")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho '"+words+"' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := bwrap.New(bwrap.Options{Slirp: fake})
	if err := p.Probe(ctx); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	var daemonLog lockedBuffer
	e := newEnv(t, func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Logger = slog.New(slog.NewTextHandler(&daemonLog, nil))
	})
	s, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: berth.SandboxBwrap, Network: berth.NetworkOf(true)})
	if err != nil {
		t.Fatalf("create = %v, want a stopped session", err)
	}
	if s.State != berth.StateStopped || s.StopReason != berth.StopStartupFailed || s.Failure == nil ||
		!strings.Contains(s.Failure.Message, "bwrap: the sandbox did not start: slirp4netns failed: "+words) {
		t.Fatalf("session %s, %s, failure %+v: want slirp4netns's words", s.State, s.StopReason, s.Failure)
	}
	evs := e.events(s.ID)
	if last := evs[len(evs)-1]; last.Type != berth.EventSessionStopped || !strings.Contains(string(last.Data), words) {
		t.Errorf("last event = %s %s", last.Type, last.Data)
	}
	if !strings.Contains(daemonLog.String(), words) {
		t.Errorf("the daemon's log does not say why:\n%s", daemonLog.String())
	}
}

// lockedBuffer is a bytes.Buffer a logger writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
