package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berth-sh/berth"
)

// workspaceFlags are the create flags that shape the workspace: a git
// worktree, files written into it, read-only mounts.
type workspaceFlags struct {
	repo, branch, base string
	files              []string
	mounts             []string
}

// add registers the flags on fl.
func (w *workspaceFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&w.repo, "worktree-repo", "", "make the workspace a new git worktree of this repository (with --worktree-branch)")
	fl.StringVar(&w.branch, "worktree-branch", "", "the new branch the worktree checks out")
	fl.StringVar(&w.base, "worktree-base", "", "what the branch starts from (default HEAD)")
	fl.StringArrayVar(&w.files, "file", nil, "write a file into the workspace before the agent starts: REL=@LOCALPATH (a local file's content) or REL=TEXT; @@ starts a TEXT with @ (repeatable)")
	fl.StringArrayVar(&w.mounts, "mount", nil, "bind this [[sandbox.mounts]] entry read-only (repeatable)")
}

// fill sets req's worktree, files and mounts from the flags, or returns a
// usage error.
func (w *workspaceFlags) fill(cmd *cobra.Command, req *berth.CreateRequest) error {
	if w.repo != "" || w.branch != "" || w.base != "" {
		if w.repo == "" || w.branch == "" {
			return usagef(cmd, "--worktree-repo and --worktree-branch go together")
		}
		repo, err := filepath.Abs(w.repo)
		if err != nil {
			return usagef(cmd, "bad --worktree-repo: %v", err)
		}
		req.Worktree = &berth.WorktreeRequest{Repo: repo, Branch: w.branch, Base: w.base}
	}
	for _, f := range w.files {
		rel, val, ok := strings.Cut(f, "=")
		if !ok || rel == "" {
			return usagef(cmd, "--file wants REL=@LOCALPATH or REL=TEXT, not %q", f)
		}
		switch {
		case strings.HasPrefix(val, "@@"):
			val = val[1:]
		case strings.HasPrefix(val, "@"):
			b, err := os.ReadFile(val[1:])
			if err != nil {
				return usagef(cmd, "--file %s: %v", rel, err)
			}
			val = string(b)
		}
		if req.Files == nil {
			req.Files = map[string]string{}
		}
		if _, dup := req.Files[rel]; dup {
			return usagef(cmd, "--file %s is given twice", rel)
		}
		req.Files[rel] = val
	}
	if len(w.mounts) > 0 {
		req.Mounts = w.mounts
	}
	return nil
}
