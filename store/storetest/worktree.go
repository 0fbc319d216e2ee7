package storetest

import (
	"slices"
	"testing"

	"github.com/berth-sh/berth"
)

// testWorktreeMounts checks that a session's worktree (its hidden
// directories and ownership included: the sandbox binds them and delete
// removes the worktree by them) and its mounts come back whole through
// create, get, list and update.
func testWorktreeMounts(t *testing.T, open Opener) {
	s := fresh(t, open)
	want := newSession("s1", base)
	want.Worktree = &berth.Worktree{Repo: "/src/app", Branch: "agent/one", Base: "main",
		GitDir: "/src/app/.git/worktrees/s1", CommonDir: "/src/app/.git", Owned: true}
	want.Mounts = []string{"gomod", "models"}
	create(t, s, want)
	same := func(what string, got *berth.Session) {
		t.Helper()
		if got.Worktree == nil || *got.Worktree != *want.Worktree {
			t.Fatalf("%s: worktree %+v, want %+v", what, got.Worktree, want.Worktree)
		}
		if !slices.Equal(got.Mounts, want.Mounts) {
			t.Fatalf("%s: mounts %v, want %v", what, got.Mounts, want.Mounts)
		}
	}
	same("get", get(t, s, "s1"))
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("list = %v, %v", page, err)
	}
	same("list", page.Sessions[0])
	next := get(t, s, "s1")
	next.Name = "renamed"
	if err := s.UpdateSession(ctx(t), next, ""); err != nil {
		t.Fatal(err)
	}
	same("after update", get(t, s, "s1"))

	// A child in its parent's worktree does not own it.
	child := newSession("s2", base)
	child.Worktree = &berth.Worktree{Repo: "/src/app", Branch: "agent/one", GitDir: "/g", CommonDir: "/c"}
	create(t, s, child)
	if got := get(t, s, "s2").Worktree; got == nil || got.Owned || got.GitDir != "/g" {
		t.Fatalf("child worktree %+v", got)
	}
}
