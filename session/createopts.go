package session

import (
	"context"
	"os"
	"path/filepath"
	"slices"

	"github.com/berth-sh/berth"
)

// checkCreateOptions checks a create request's worktree, files and mounts
// (CONTRACT §4.1 v2) before anything is written. For a child (kid set) it
// refuses a worktree of its own and mounts its parent lacks, and gives it
// its parent's mounts when it names none. It returns the repository's git
// directory for a worktree.
func (m *Manager) checkCreateOptions(ctx context.Context, req *berth.CreateRequest, kid *spawn) (string, error) {
	if kid != nil {
		if req.Worktree != nil {
			return "", forbidden("worktree", "worktree: a child works in its parent's workspace")
		}
		if req.Mounts == nil {
			req.Mounts = slices.Clone(kid.parent.Mounts)
		}
		for _, name := range req.Mounts {
			if !slices.Contains(kid.parent.Mounts, name) {
				return "", forbidden("mounts", "mounts: the parent session was not given mount "+name)
			}
		}
	}
	if err := checkFiles(req.Files); err != nil {
		return "", err
	}
	if err := m.checkMounts(req.Mounts, req.Workspace); err != nil {
		return "", err
	}
	if req.Worktree == nil {
		return "", nil
	}
	return m.checkWorktree(ctx, req)
}

// prepareWorkspace makes the new session's workspace what the request
// asks before its agent starts: a worktree (recorded on s), the parent's
// worktree for a child in it, then the files.
func (m *Manager) prepareWorkspace(ctx context.Context, s *berth.Session, req *berth.CreateRequest, common string, parent *berth.Session) error {
	if req.Worktree != nil {
		if err := m.addWorktree(ctx, s, req.Worktree, common); err != nil {
			_ = os.RemoveAll(s.Workspace)
			return err
		}
	} else if parent != nil && parent.Worktree != nil {
		w := *parent.Worktree
		w.Owned = false
		s.Worktree = &w
	}
	if err := writeFiles(s.Workspace, req.Files); err != nil {
		if s.Worktree != nil && s.Worktree.Owned {
			_ = os.RemoveAll(s.Workspace)
			m.removeWorktree(ctx, s.Worktree)
		} else if s.ManagedWorkspace {
			_ = os.RemoveAll(s.Workspace)
		}
		return err
	}
	return nil
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
