package session

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"
)

// mountError is the 400 a refused mount gets.
func mountError(format string, a ...any) error {
	return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf(format, a...), Details: map[string]any{"field": "mounts"}}
}

// mountNames lists the configured mounts' names, for an error.
func (pl *placement) mountNames() string {
	var names []string
	for _, mt := range pl.m.opts.Sandbox.Mounts {
		names = append(names, mt.Name)
	}
	if len(names) == 0 {
		return "none is configured ([[sandbox.mounts]])"
	}
	return "configured: " + strings.Join(names, ", ")
}

// mountByName finds a configured mount.
func (pl *placement) mountByName(name string) (berth.Mount, bool) {
	i := slices.IndexFunc(pl.m.opts.Sandbox.Mounts, func(mt berth.Mount) bool { return mt.Name == name })
	if i < 0 {
		return berth.Mount{}, false
	}
	return pl.m.opts.Sandbox.Mounts[i], true
}

// checkMounts checks the mounts a create request names: each configured
// (400 listing the configured ones otherwise), named once, its host path
// present and none of the daemon's, its target none of the sandbox's own
// directories nor the daemon's home (where every session's workspace and
// HOME live), nor the workspace ws ("" for a managed one) or above it.
func (pl *placement) checkMounts(names []string, ws string) error {
	seen := map[string]bool{}
	for _, name := range names {
		mt, ok := pl.mountByName(name)
		if !ok {
			return mountError("unknown mount %q: %s", name, pl.mountNames())
		}
		if seen[name] {
			return mountError("mount %q is named twice", name)
		}
		seen[name] = true
		if _, err := os.Stat(mt.Host); err != nil {
			return berth.WrapError(berth.EUnavailable, err, "mount %q: its host path %s is missing", name, mt.Host)
		}
		if err := pl.checkNotDaemons(resolvedPath(mt.Host)); err != nil {
			return mountError("mount %q: its host path %s lies in the daemon's home", name, mt.Host)
		}
		if err := mt.Validate(); err != nil {
			return mountError("%s", berth.ErrorMessage(err))
		}
		for _, dir := range []string{pl.m.opts.Home, ws} {
			if dir != "" && (pathx.Within(dir, mt.Target) || pathx.Within(mt.Target, dir)) {
				return mountError("mount %q: its target %s is the daemon's home or the workspace, or lies in or above one", name, mt.Target)
			}
		}
	}
	return nil
}

// mountBinds are the read-only binds of s's mounts. A mount the config no
// longer has, or whose host path is gone, is left out (and logged): a
// resume still starts.
func (pl *placement) mountBinds(s *berth.Session) []berth.Bind {
	var out []berth.Bind
	for _, name := range s.Mounts {
		mt, ok := pl.mountByName(name)
		if !ok {
			pl.m.logger.Warn("a session's mount is no longer configured: not bound", "session_id", s.ID, "mount", name)
			continue
		}
		if _, err := os.Stat(mt.Host); err != nil {
			pl.m.logger.Warn("a session's mount has no host path: not bound", "session_id", s.ID, "mount", name, "err", err)
			continue
		}
		// The config may have changed since the create checked it.
		if mt.Validate() != nil || pathx.Within(pl.m.opts.Home, mt.Target) || pathx.Within(mt.Target, pl.m.opts.Home) ||
			pathx.Within(s.Workspace, mt.Target) || pathx.Within(mt.Target, s.Workspace) {
			pl.m.logger.Warn("a session's mount now targets the workspace, the daemon's home or a sandbox directory: not bound", "session_id", s.ID, "mount", name)
			continue
		}
		out = append(out, berth.Bind{Source: mt.Host, Target: mt.Target})
	}
	return out
}
