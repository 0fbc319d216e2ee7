package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"
	"github.com/berth-sh/berth/internal/safegit"
)

// worktreeError is the 400 a refused worktree option gets.
func worktreeError(field, format string, a ...any) error {
	return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf(format, a...),
		Details: map[string]any{"field": "worktree." + field}}
}

// checkWorktree checks a create request's worktree option before anything
// is written, and fills it in: the repository's real path, the branch, the
// base (HEAD when not given). It returns the repository's git directory
// (the common one, for a repository that is itself a linked worktree).
// Every git it runs is safegit.Run's: no hook, filter or helper of the
// repository runs.
func (pl *placement) checkWorktree(ctx context.Context, req *berth.CreateRequest) (string, error) {
	w := req.Worktree
	if req.Workspace != "" {
		return "", &berth.Error{Code: berth.EInvalid, Message: "worktree makes the workspace (a new worktree in berth's managed directory): omit workspace",
			Details: map[string]any{"field": "workspace"}}
	}
	if req.FromSnapshot != "" {
		return "", &berth.Error{Code: berth.EInvalid, Message: "worktree and from_snapshot both make the workspace: give one",
			Details: map[string]any{"field": "from_snapshot"}}
	}
	if !filepath.IsAbs(w.Repo) {
		return "", worktreeError("repo", "worktree.repo must be an absolute path")
	}
	repo, err := filepath.EvalSymlinks(w.Repo)
	if fi, serr := os.Stat(repo); err != nil || serr != nil || !fi.IsDir() {
		return "", worktreeError("repo", "worktree.repo %s does not exist or is not a directory", w.Repo)
	}
	if w.Branch == "" {
		return "", worktreeError("branch", "worktree.branch is required")
	}
	if w.Base == "" {
		w.Base = "HEAD"
	}
	if strings.HasPrefix(w.Base, "-") || strings.ContainsAny(w.Base, "\x00\n") {
		return "", worktreeError("base", "worktree.base %q is not a revision", w.Base)
	}
	// The branch must be a valid new branch name, as git reads it (and not
	// one it would expand, such as @{-1}).
	out, err := safegit.Run(ctx, "/", nil, "check-ref-format", "--branch", w.Branch)
	if err != nil || strings.TrimSpace(string(out)) != w.Branch || strings.HasPrefix(w.Branch, "-") {
		if berth.IsCode(err, berth.EUnavailable) {
			return "", err
		}
		return "", worktreeError("branch", "worktree.branch %q is not a valid branch name", w.Branch)
	}
	out, err = safegit.Run(ctx, repo, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		if berth.IsCode(err, berth.EUnavailable) {
			return "", err
		}
		return "", worktreeError("repo", "worktree.repo %s is not a git repository: %s", w.Repo, berth.ErrorMessage(err))
	}
	common := resolvedPath(strings.TrimSpace(string(out)))
	// The sandbox is given the repository's git directory: never the
	// daemon's own files, nor (under root) a system directory's.
	for _, dir := range []string{repo, common} {
		// Not even a session's workspace there: its .git is the agent's
		// to rewrite, and would choose which git directory the new
		// session is given.
		if pl.m.opts.Home != "" && pathx.Within(resolvedPath(pl.m.opts.Home), dir) {
			return "", worktreeError("repo", "worktree.repo %s lies in the daemon's home (a session's workspace included): refused; give the repository the session's branch came from, with the branch as base", w.Repo)
		}
		// Nor a directory people share: its writable parts are given to
		// the sandbox as a workspace is (the same check).
		if err := pl.checkWorkspace(dir, "worktree.repo"); err != nil {
			return "", err
		}
	}
	if _, err := safegit.Run(ctx, repo, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", "refs/heads/"+w.Branch); err == nil {
		return "", &berth.Error{Code: berth.EConflict, Message: fmt.Sprintf("branch %q already exists in %s", w.Branch, w.Repo),
			Details: map[string]any{"field": "worktree.branch"}}
	}
	if _, err := safegit.Run(ctx, repo, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", w.Base+"^{commit}"); err != nil {
		return "", worktreeError("base", "worktree.base %q is not a commit of %s", w.Base, w.Repo)
	}
	// The sandbox gets objects/ writable with these two read-only on top:
	// one missing would be the agent's to make (an alternates file, packs
	// and a commit graph the daemon's own git would then read).
	for _, sub := range []string{"pack", "info"} {
		if p := filepath.Join(common, "objects", sub); !safegit.IsRealDir(p) {
			return "", worktreeError("repo", "worktree.repo %s: its git directory has no objects/%s directory (a sandbox could make one git then reads): refused; create it (mkdir %s)", w.Repo, sub, p)
		}
	}
	if safegit.RefPathLinked(common, w.Branch) {
		return "", worktreeError("branch", "worktree.branch %q: a directory on the way to its ref in %s is not a plain directory: refused", w.Branch, common)
	}
	w.Repo = repo
	return common, nil
}

// addWorktree makes s's workspace (an empty directory berth made) a new
// worktree of w.Repo on the new branch w.Branch from w.Base, and records
// it on s. The worktree's own git directory is read from the .git file
// git wrote, once, and must lie in common's worktrees/ directory.
func (pl *placement) addWorktree(ctx context.Context, s *berth.Session, w *berth.WorktreeRequest, common string) error {
	filters, err := safegit.FilterOverrides(ctx, w.Repo)
	if err != nil {
		return err
	}
	if _, err := safegit.Run(ctx, w.Repo, filters, "worktree", "add", "-b", w.Branch, "--", s.Workspace, w.Base); err != nil {
		if berth.IsCode(err, berth.EUnavailable) {
			return err
		}
		// A create that raced this one for the branch.
		if _, verr := safegit.Run(ctx, w.Repo, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", "refs/heads/"+w.Branch); verr == nil {
			return &berth.Error{Code: berth.EConflict, Message: fmt.Sprintf("branch %q already exists in %s", w.Branch, w.Repo),
				Details: map[string]any{"field": "worktree.branch"}}
		}
		return berth.WrapError(berth.EInvalid, err, "worktree: %s", berth.ErrorMessage(err))
	}
	gitDir, err := worktreeGitDir(s.Workspace, common)
	if err != nil {
		return err
	}
	s.Worktree = &berth.Worktree{Repo: w.Repo, Branch: w.Branch, Base: w.Base, GitDir: gitDir, CommonDir: common, Owned: true}
	return nil
}

// worktreeGitDir reads the gitdir line of the .git file in ws and checks
// that it names a directory of common's worktrees/.
func worktreeGitDir(ws, common string) (string, error) {
	b, err := os.ReadFile(filepath.Join(ws, ".git"))
	if err != nil {
		return "", berth.WrapError(berth.EInternal, err, "worktree: read its .git file")
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || !filepath.IsAbs(dir) {
		return "", berth.Errorf(berth.EInternal, "worktree: its .git file does not name an absolute git directory")
	}
	dir = resolvedPath(dir)
	if filepath.Dir(dir) != filepath.Join(common, "worktrees") {
		return "", berth.Errorf(berth.EInternal, "worktree: its git directory %s is not in %s/worktrees", dir, common)
	}
	return dir, nil
}

// removeWorktree undoes addWorktree for a session whose workspace is gone
// (or about to go): it removes the worktree's own git directory and has
// git prune what is left. The branch stays. The daemon removes the
// directories itself rather than through git worktree remove, which would
// read the working tree and its git directory, both the agent's to write.
func (pl *placement) removeWorktree(ctx context.Context, w *berth.Worktree) {
	if w == nil || !w.Owned || w.GitDir == "" {
		return
	}
	if filepath.Dir(w.GitDir) != filepath.Join(w.CommonDir, "worktrees") {
		pl.m.logger.Warn("worktree git directory outside the repository's worktrees/: left", "dir", w.GitDir)
		return
	}
	// Lstat: the directory itself, never a link the agent put in its place.
	if fi, err := os.Lstat(w.GitDir); err == nil && fi.IsDir() {
		if err := os.RemoveAll(w.GitDir); err != nil {
			pl.m.logger.Warn("remove worktree git directory", "dir", w.GitDir, "err", err)
		}
	} else if err == nil {
		pl.m.logger.Warn("worktree git directory is no longer a directory: left", "dir", w.GitDir)
	}
	if _, err := safegit.Run(ctx, w.CommonDir, nil, "worktree", "prune"); err != nil && !errors.Is(err, context.Canceled) {
		pl.m.logger.Warn("git worktree prune", "repo", w.Repo, "err", err)
	}
}
