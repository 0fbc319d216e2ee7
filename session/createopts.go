package session

import (
	"context"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/session/wsfiles"
)

// checkCreateOptions checks a create request's worktree, files and mounts
// (docs/api.md, "Worktrees, files and mounts") before anything is written. It
// returns the repository's git directory for a worktree.
func (pl *placement) checkCreateOptions(ctx context.Context, req *berth.CreateRequest) (string, error) {
	if err := wsfiles.Check(req.Files); err != nil {
		return "", err
	}
	if err := pl.checkMounts(req.Mounts, req.Workspace); err != nil {
		return "", err
	}
	if req.Worktree == nil {
		return "", nil
	}
	return pl.checkWorktree(ctx, req)
}

// unlinkWorktreeFile removes the .git file a workspace restored from a
// snapshot of a worktree session has: it names the other session's own
// git directory, which the fork would share (one index for two trees).
// The fork's workspace is a plain copy of the files.
func unlinkWorktreeFile(ws string) {
	p := filepath.Join(ws, ".git")
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
		_ = os.Remove(p)
	}
}
