package session

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// placement says where and how a session runs: the sandbox provider it
// gets and what that sandbox is given (sandbox.go), its workspace and
// the daemon's own paths it must not reach (workspace.go, worktree.go,
// mounts.go), its private HOME and the files copied there (homefiles.go).
type placement struct {
	m *Manager
	// own is the daemon's own directories with their links resolved,
	// once all of them exist: they do not move while the daemon holds
	// its home, and they are asked for per session: a sandbox's config
	// at each start and reattach, managedMovesHere for each session a
	// list shows.
	ownMu sync.Mutex
	own   *ownPaths
}

// ownPaths are the daemon's directories, their links resolved.
type ownPaths struct {
	workspaces, sessions string
	hidden               []string // the home, and Options.Hidden
}

// ownPaths resolves the daemon's directories, or returns them as
// resolved before; while one is missing they are resolved again on each
// call (as resolvedPath resolves what exists).
func (pl *placement) ownPaths() *ownPaths {
	pl.ownMu.Lock()
	defer pl.ownMu.Unlock()
	if pl.own != nil {
		return pl.own
	}
	all := true
	resolve := func(p string) string {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			all = false
			return filepath.Clean(p)
		}
		return r
	}
	o := &ownPaths{workspaces: resolve(pl.workspacesDir()), sessions: resolve(pl.sessionsDir())}
	for _, p := range append([]string{pl.m.opts.Home}, pl.m.opts.Hidden...) {
		if p != "" {
			o.hidden = append(o.hidden, resolve(p))
		}
	}
	// Shared by every sandbox's config: an append copies.
	o.hidden = slices.Clip(o.hidden)
	if all {
		pl.own = o
	}
	return o
}

// resolvedUnder is resolvedPath of root joined with rel, for a root
// resolved already: only the components of rel are looked at (an lstat
// each), unless one of them is a link or missing.
func resolvedUnder(root string, rel ...string) string {
	p := root
	for _, c := range rel {
		p = filepath.Join(p, c)
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return resolvedPath(filepath.Join(append([]string{root}, rel...)...))
		}
	}
	return p
}
