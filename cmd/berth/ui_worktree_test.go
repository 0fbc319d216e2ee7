package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/berth-sh/berth/internal/testenv"
)

// The New session form makes a worktree session (and refuses a branch
// without a repository); the session page names its worktree
// (repository, branch, base).
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
	// Made from the New session form.
	tab := uiPage(t, b, s, "/")
	tab.WaitFor("the agents in the form", `document.querySelector('#ns-agent option[value=demo]')`)
	tab.Run(browsertest.Click(browsertest.Button("New session")))
	tab.Run(
		browsertest.Select(browsertest.Field("Agent"), "demo"),
		browsertest.Select(browsertest.Field("Sandbox"), "host"),
		browsertest.Type(browsertest.Field("New branch"), "agent/checkout"),
	)
	// A branch without a repository is refused in the form.
	tab.Run(browsertest.Click(browsertest.Button("Create")))
	tab.WaitFor("the form's refusal", `document.querySelector('dialog.new-session .error').textContent.includes('both a repository and a new branch')`)
	tab.Run(browsertest.Type(browsertest.Field("Git repository"), repo))
	shot(t, tab, "new-session-worktree")
	tab.Run(browsertest.Click(browsertest.Button("Create")))
	tab.WaitFor("the session's page", `location.pathname.startsWith('/sessions/ses_')`)
	tab.WaitFor("the worktree fact", `[...document.querySelectorAll('.session-head dt')].some(dt => dt.textContent == 'Worktree' && dt.nextElementSibling.textContent.includes('agent/checkout (from HEAD)') && dt.nextElementSibling.textContent.includes('/shop'))`)
	shot(t, tab, "session-worktree")
	noPageErrors(t, tab)
}
