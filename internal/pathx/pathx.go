// Package pathx holds the path checks more than one package makes.
package pathx

import (
	"path/filepath"
	"strings"
)

// Within reports whether path is base or lies under it, by their clean
// forms (no symbolic link is resolved).
func Within(base, path string) bool {
	rel, err := filepath.Rel(base, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
