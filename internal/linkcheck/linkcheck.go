// Package linkcheck decides whether a symlink in a tree leaves it: the
// check snapshots and checkpoints make so that an archive or a checkpoint
// keeps exactly the links that stay inside the workspace.
package linkcheck

import (
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// maxLinkHops bounds the symlinks followed while resolving one, as Linux's
// MAXSYMLINKS does; a longer chain counts as escaping.
const maxLinkHops = 40

// LexicallyEscapes reports whether the symlink name (a clean, slash
// separated path relative to the root) with target is absolute or leaves
// the root by its ".." alone, without looking at the file system.
func LexicallyEscapes(name, target string) bool {
	if target == "" || path.IsAbs(target) {
		return true
	}
	p := path.Join(path.Dir(name), target)
	return p == ".." || strings.HasPrefix(p, "../")
}

// Escapes reports whether following the symlink name (a clean, slash
// separated path relative to root) to target would leave root. It resolves
// target one component at a time, following the symlinks it meets inside
// root, so that "s -> ." plus "t -> s/.." is caught although both look
// harmless lexically. From the first component that is missing or not a
// directory on, the rest is taken lexically, which is what a later mkdir
// along that path would make of it. A chain of more than maxLinkHops
// symlinks counts as escaping.
func Escapes(root *os.Root, name, target string) bool {
	hops := 0
	_, _, escaped := resolve(root, splitPath(path.Dir(name)), target, &hops)
	return escaped
}

// resolve resolves target relative to the directory dir (resolved
// components below root). It returns the components of the result, whether
// the result was reached only lexically, and whether it left root.
func resolve(root *os.Root, dir []string, target string, hops *int) (cur []string, lexical, escaped bool) {
	if target == "" || path.IsAbs(target) {
		return nil, false, true
	}
	cur = slices.Clone(dir)
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return nil, false, true
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, c)
		if lexical {
			continue
		}
		p := strings.Join(cur, "/")
		fi, err := root.Lstat(p)
		if err != nil {
			lexical = true
			continue
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			*hops++
			if *hops > maxLinkHops {
				return nil, false, true
			}
			t, err := root.Readlink(p)
			if err != nil {
				return nil, false, true
			}
			cur, lexical, escaped = resolve(root, cur[:len(cur)-1], t, hops)
			if escaped {
				return nil, false, true
			}
		case !fi.IsDir():
			lexical = true
		}
	}
	return cur, lexical, false
}

// splitPath splits a clean slash-separated relative path into its
// components; "." has none.
func splitPath(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
