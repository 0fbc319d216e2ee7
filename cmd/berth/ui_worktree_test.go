package main

import (
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
)

// The New session form makes a worktree session (and refuses a branch
// without a repository); the session page names its worktree
// (repository, branch, base).
func TestUIShowsTheWorktree(t *testing.T) {
	repo := gitRepo(t, filepath.Join(t.TempDir(), "shop"))
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	// Made from the New session form.
	tab := newSessionForm(t, b, s)
	tab.Run(browsertest.Type(browsertest.Field("New branch"), "agent/checkout"))
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
