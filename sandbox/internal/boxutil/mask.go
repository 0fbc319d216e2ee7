package boxutil

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth/internal/core"
)

// Mask is one path inside a sandbox that must show nothing of the host:
// a hidden directory gets an empty one over it, a hidden file an empty
// read-only file (/dev/null).
type Mask struct {
	// Path is the path inside the sandbox.
	Path string
	// Dir says the hidden path is a directory.
	Dir bool
}

// Masks lists what SandboxConfig.Hide asks to be covered: each hidden
// path that exists and lies strictly inside the workspace, the home or a
// bind's source, at the place it takes inside the sandbox. Hidden paths
// and sources are compared with their symbolic links resolved, so that a
// link on the way does not slip one past. A hidden path a mount lies
// inside needs no mask (the mount shows only its own part).
func Masks(cfg core.SandboxConfig) []Mask {
	type view struct{ src, dst string }
	views := []view{{cfg.Workspace, cfg.Workspace}}
	if cfg.Home != "" {
		views = append(views, view{cfg.Home, cfg.Home})
	}
	for _, b := range cfg.Binds {
		dst := b.Target
		if dst == "" {
			dst = b.Source
		}
		views = append(views, view{b.Source, dst})
	}
	var out []Mask
	seen := map[string]bool{}
	for _, h := range cfg.Hide {
		fi, err := os.Stat(h)
		if err != nil {
			continue
		}
		real := resolved(h)
		for _, v := range views {
			src := resolved(v.src)
			if !strings.HasPrefix(real, src+"/") && !(src == "/" && real != "/") {
				continue
			}
			p := filepath.Join(filepath.Clean(v.dst), strings.TrimPrefix(real, src))
			if !seen[p] {
				seen[p] = true
				out = append(out, Mask{Path: p, Dir: fi.IsDir()})
			}
		}
	}
	return out
}

// resolved is p, absolute and clean, with its symbolic links resolved
// where they can be.
func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}
