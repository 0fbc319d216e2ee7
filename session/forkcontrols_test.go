package session

import (
	"context"
	"testing"

	"github.com/berth-sh/berth"
)

// TestForkKeepsTheAgentsControls: a fork offers the agent's modes, config
// and commands as its parent did, through session/fork (the mode the kept
// turns ran in) and through a new conversation alike; set and commands
// work on it.
func TestForkKeepsTheAgentsControls(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	e := newEnv(t, withCheckpoints(home, state))
	ctx := context.Background()
	for _, tc := range []struct{ agent, mode string }{{"demo", "plan"}, {"demo-nofork", "default"}} {
		t.Run(tc.agent, func(t *testing.T) {
			p := e.create(berth.CreateRequest{Agent: tc.agent})
			if _, err := e.m.PatchSession(ctx, p.ID, berth.SessionPatch{Mode: "plan"}); err != nil {
				t.Fatal(err)
			}
			e.prompt(p.ID, "echo one")
			e.prompt(p.ID, "echo two")
			list, err := e.m.ListCheckpoints(ctx, p.ID)
			if err != nil || len(list) != 2 {
				t.Fatalf("list %v %v", list, err)
			}
			f, err := e.m.Fork(ctx, p.ID, berth.ForkRequest{CheckpointID: list[1].ID})
			if err != nil {
				t.Fatal(err)
			}
			if f.ACP.Modes == nil || f.ACP.Modes.Current != tc.mode || len(f.ACP.ConfigOptions) == 0 {
				t.Fatalf("the fork offers modes %+v, config %+v; want the mode %q", f.ACP.Modes, f.ACP.ConfigOptions, tc.mode)
			}
			got, err := e.m.PatchSession(ctx, f.ID, berth.SessionPatch{Mode: "default"})
			if err != nil || got.ACP.Modes.Current != "default" {
				t.Fatalf("set mode on the fork: %v %+v", err, got)
			}
			waitFor(t, "the fork's commands", func() bool {
				s, err := e.m.GetSession(ctx, f.ID)
				return err == nil && len(s.ACP.Commands) > 0
			})
		})
	}
}
