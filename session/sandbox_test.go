package session

import (
	"context"
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
