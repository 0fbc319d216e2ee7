package session

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// withMounts configures [[sandbox.mounts]].
func withMounts(ms ...berth.Mount) func(*Options) {
	return func(o *Options) { o.Sandbox.Mounts = ms }
}

// A mount asked for by name is bound read-only at its target in bwrap,
// listed on the session, and bound again after a resume; a session that
// does not ask does not see it.
func TestMountsBoundReadOnlyInBwrap(t *testing.T) {
	cache := t.TempDir()
	if err := os.WriteFile(filepath.Join(cache, "pkg.txt"), []byte("cached"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := bwrapEnv(t, withMounts(berth.Mount{Name: "gomod", Host: cache, Target: "/cache/gomod"}))
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Mounts: []string{"gomod"}})
	if !slices.Equal(s.Mounts, []string{"gomod"}) {
		t.Fatalf("session mounts = %v", s.Mounts)
	}
	check := func(when string) {
		t.Helper()
		if r := e.sh(s.ID, "cat /cache/gomod/pkg.txt"); r.ExitCode != 0 || r.Stdout != "cached" {
			t.Fatalf("%s: read the mount: %d %q %q", when, r.ExitCode, r.Stdout, r.Stderr)
		}
		if r := e.sh(s.ID, "echo x > /cache/gomod/new; echo y > /cache/gomod/pkg.txt"); r.ExitCode == 0 {
			t.Fatalf("%s: the mount is writable", when)
		}
		if entries, _ := os.ReadDir(cache); len(entries) != 1 {
			t.Fatalf("%s: the sandbox wrote the cache: %v", when, entries)
		}
	}
	check("after create")
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.ResumeSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	check("after resume")
	plain := e.create(berth.CreateRequest{})
	if r := e.sh(plain.ID, "cat /cache/gomod/pkg.txt"); r.ExitCode == 0 {
		t.Fatal("a session that did not ask sees the mount")
	}

	// A config changed since to aim the mount at the workspace: the
	// resumed session starts, its workspace not covered.
	if err := os.WriteFile(filepath.Join(s.Workspace, "mine.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	e.close()
	e.open(func(o *Options) {
		o.Providers = append(o.Providers, bwrapProvider(t))
		o.Sandbox.Default = berth.SandboxBwrap
	}, withMounts(berth.Mount{Name: "gomod", Host: cache, Target: s.Workspace}))
	if _, err := e.m.ResumeSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if r := e.sh(s.ID, "cat mine.txt"); r.ExitCode != 0 || r.Stdout != "mine" {
		t.Fatalf("the mount covered the workspace: %+v", r)
	}
}

// An unknown mount is refused listing the configured ones; a mount over
// the workspace, or whose host path is gone, is refused; nothing is made.
func TestMountsRefused(t *testing.T) {
	cache := t.TempDir()
	ws := t.TempDir()
	gone := filepath.Join(t.TempDir(), "gone")
	e := newEnv(t, withMounts(
		berth.Mount{Name: "gomod", Host: cache, Target: "/cache/gomod"},
		berth.Mount{Name: "npm", Host: cache, Target: "/cache/npm"},
		berth.Mount{Name: "over-ws", Host: cache, Target: ws},
		berth.Mount{Name: "above-ws", Host: cache, Target: filepath.Dir(ws)},
		berth.Mount{Name: "gone", Host: gone, Target: "/cache/gone"},
		berth.Mount{Name: "etc", Host: cache, Target: "/etc/x"},
	))
	ctx := context.Background()
	_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Mounts: []string{"nope"}})
	if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(berth.ErrorMessage(err), "gomod, npm") {
		t.Fatalf("unknown mount: %v", err)
	}
	for name, code := range map[string]string{"over-ws": berth.EInvalid, "above-ws": berth.EInvalid, "gone": berth.EUnavailable, "etc": berth.EInvalid} {
		if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Workspace: ws, Mounts: []string{name}}); berth.ErrorCode(err) != code {
			t.Errorf("mount %s: %v, want %s", name, err, code)
		}
	}
	if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Mounts: []string{"gomod", "gomod"}}); !berth.IsCode(err, berth.EInvalid) {
		t.Errorf("a mount named twice: %v", err)
	}
	// The host provider has no sandbox to bind into.
	if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Mounts: []string{"gomod"}}); !berth.IsCode(err, berth.EInvalid) ||
		!strings.Contains(berth.ErrorMessage(err), "sandbox host binds nothing") {
		t.Errorf("mounts under host: %v", err)
	}
	if page, err := e.m.ListSessions(ctx, berth.SessionFilter{}); err != nil || len(page.Sessions) != 0 {
		t.Fatalf("sessions after refusals: %d, %v", len(page.Sessions), err)
	}
}

// A child inherits its parent's mounts and worktree (not its own to
// remove), may not ask for a mount its parent lacks nor a worktree of its
// own, and its delete leaves the parent's worktree.
func TestChildOfAWorktreeSession(t *testing.T) {
	needGit(t)
	cache := t.TempDir()
	e := bwrapEnv(t, withMounts(berth.Mount{Name: "a", Host: cache, Target: "/cache/a"},
		berth.Mount{Name: "b", Host: cache, Target: "/cache/b"}))
	ctx := context.Background()
	repo := newRepo(t)
	p := e.create(berth.CreateRequest{Mounts: []string{"a"}, Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/p"}})
	kid, err := e.m.SpawnChild(ctx, p.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kid.Mounts, []string{"a"}) || kid.Worktree == nil || kid.Worktree.Branch != "agent/p" || kid.Workspace != p.Workspace {
		t.Fatalf("child: mounts %v worktree %+v workspace %s", kid.Mounts, kid.Worktree, kid.Workspace)
	}
	if _, err := e.m.SpawnChild(ctx, p.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60, Mounts: []string{"b"}}, ""); !berth.IsCode(err, berth.EForbidden) {
		t.Fatalf("a mount the parent lacks: %v", err)
	}
	if _, err := e.m.SpawnChild(ctx, p.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60,
		Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/kid"}}, ""); !berth.IsCode(err, berth.EForbidden) {
		t.Fatalf("a worktree of its own: %v", err)
	}
	if err := e.m.DeleteSession(ctx, kid.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.Workspace, "README")); err != nil {
		t.Fatalf("the child's delete removed the parent's worktree: %v", err)
	}
	if !strings.Contains(worktreeDirs(t, repo), p.Workspace) {
		t.Fatal("the child's delete unregistered the parent's worktree")
	}
}
