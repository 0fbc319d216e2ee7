package safegit

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth"
)

// WorktreeBinds is what a sandbox needs of the repository for git to work
// in a worktree workspace, at the same paths (the worktree's .git file
// names them): the repository's git directory read-only (config, hooks,
// packed refs, other worktrees), and on top, read-write, only what a
// commit on the session's branch writes: the worktree's own git directory
// (HEAD, index, logs), the object store for new objects (its packs and
// info/, where alternates are named, stay read-only), and the directory
// of refs/heads holding the branch's ref and the matching directory of
// the reflogs. Every ref in that directory is writable: a branch in a
// directory of its own (agent/<task>) shares it with none of the user's.
func WorktreeBinds(w *berth.Worktree) []berth.Bind {
	if w == nil || w.CommonDir == "" {
		return nil
	}
	c := w.CommonDir
	sub := path.Dir("refs/heads/" + w.Branch)
	binds := []berth.Bind{{Source: c, Target: c}}
	rw := []string{filepath.Join(c, "objects"), filepath.Join(c, sub), filepath.Join(c, "logs", sub), w.GitDir}
	ro := []string{filepath.Join(c, "objects", "pack"), filepath.Join(c, "objects", "info")}
	for _, p := range rw {
		if IsRealDir(p) {
			binds = append(binds, berth.Bind{Source: p, Target: p, Writable: true})
		}
	}
	for _, p := range ro {
		if IsRealDir(p) {
			binds = append(binds, berth.Bind{Source: p, Target: p})
		}
	}
	return binds
}

// IsRealDir reports whether p is a directory reached through no symbolic
// link (p is absolute and clean).
func IsRealDir(p string) bool {
	r, err := filepath.EvalSymlinks(p)
	if err != nil || r != p {
		return false
	}
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// RefPathLinked reports whether a directory on the way to the branch's
// ref or reflog in common is a symbolic link (one an agent with the
// directory above could have planted): git, run by the daemon, would
// write the new ref through it.
func RefPathLinked(common, branch string) bool {
	for _, top := range []string{"refs/heads", "logs/refs/heads"} {
		p := filepath.Join(common, top)
		for _, c := range strings.Split(path.Dir(branch), "/") {
			if c == "." {
				break
			}
			p = filepath.Join(p, c)
			fi, err := os.Lstat(p)
			if err != nil {
				break
			}
			if !fi.IsDir() {
				return true
			}
		}
	}
	return false
}
