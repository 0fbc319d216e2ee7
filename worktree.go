package berth

// Worktree is the git worktree a session's workspace is (docs/api.md,
// "Worktrees, files and mounts"): a new working tree of Repo on the new branch
// Branch, made from Base. Delete removes the working tree and keeps the branch.
type Worktree struct {
	// Repo is the repository's directory, absolute (its real path once
	// the session is made).
	Repo string `json:"repo"`
	// Branch is the new branch the worktree has checked out.
	Branch string `json:"branch"`
	// Base is what the branch was made from ("HEAD" when not given).
	Base string `json:"base"`
	// GitDir is the worktree's own administrative directory in the
	// repository (<common>/worktrees/<name>) and CommonDir the
	// repository's git directory, both real paths recorded when the
	// worktree is made: the sandbox binds them, and the daemon never
	// reads them back from the workspace's .git file, which the agent
	// may rewrite. Stored, never shown.
	GitDir    string `json:"-"`
	CommonDir string `json:"-"`
	// Owned is false for a child session that works in its parent's
	// worktree: its delete leaves the worktree to the parent. Stored,
	// never shown.
	Owned bool `json:"-"`
}
