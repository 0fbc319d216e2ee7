package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/berth-sh/berth/internal/testenv"
)

// The session page names the worktree (repository, branch, base) of a
// worktree session.
func TestUIShowsTheWorktree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git", "git is not installed")
	}
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	repo := filepath.Join(t.TempDir(), "shop")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
		c := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		c.Dir, c.Env = repo, []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	id := createSession(t, s, map[string]any{"worktree": map[string]string{"repo": repo, "branch": "agent/checkout"}})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the worktree fact", `[...document.querySelectorAll('.session-head dt')].some(dt => dt.textContent == 'Worktree' && dt.nextElementSibling.textContent.includes('agent/checkout (from HEAD)') && dt.nextElementSibling.textContent.includes('/shop'))`)
	shot(t, tab, "session-worktree")
	noPageErrors(t, tab)
}
