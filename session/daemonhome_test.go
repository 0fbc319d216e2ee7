package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berth-sh/berth"
)

// A workspace that is the daemon's home or lies inside it (the socket,
// the database, the run directory, other sessions' homes would be the
// agent's) is refused with invalid_argument, a symbolic link to one too,
// and nothing is stored; a managed workspace under workspaces/ (a child
// sharing its parent's) is not.
func TestWorkspaceInTheDaemonsHomeIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Join(e.home, "sessions"), link); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{e.home, filepath.Join(e.home, "sessions"), filepath.Join(e.home, "sessions", s.ID, "home"),
		filepath.Join(e.home, "workspaces"), link} {
		_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Workspace: ws})
		var be *berth.Error
		if !berth.IsCode(err, berth.EInvalid) || !errors.As(err, &be) || be.Details["field"] != "workspace" {
			t.Errorf("workspace %s: %v, want invalid_argument on the workspace field", ws, err)
		}
	}
	page, err := e.store.ListSessions(ctx, berth.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 1 {
		t.Errorf("%d sessions stored, want only the first", len(page.Sessions))
	}
	// Another session's managed workspace is allowed.
	e.create(berth.CreateRequest{Workspace: s.Workspace})
}

// A workspace that contains the daemon's home is allowed, and its sandbox
// is told to hide the home (and Options.Hidden).
func TestWorkspaceContainingTheDaemonsHomeHidesIt(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	e := newEnv(t, func(o *Options) { o.Hidden = []string{sock} })
	s := e.create(berth.CreateRequest{Workspace: filepath.Dir(e.home)})
	spec, _ := e.m.opts.Catalog.Get(s.Agent)
	hide := e.m.place.sandboxConfig(s, spec).Hide
	for _, want := range []string{resolvedPath(e.home), sock} {
		if !slices.Contains(hide, want) {
			t.Errorf("SandboxConfig.Hide = %v, want %s in it", hide, want)
		}
	}
}
