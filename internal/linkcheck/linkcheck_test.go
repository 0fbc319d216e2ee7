package linkcheck

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEscapes: links that stay inside are allowed; links that leave, by
// their text or through other links, are not.
func TestEscapes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"s": ".", "t": "s/..", "loop1": "loop2", "loop2": "loop1"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, c := range []struct {
		name, target     string
		lexical, escapes bool
	}{
		{"a/l", "b", false, false},
		{"a/b/l", "../../a", false, false},
		{"a/l", "../../x", true, true},
		{"l", "/etc/passwd", true, true},
		{"l", "", true, true},
		{"u", "t/etc", false, true}, // harmless by its text, out through s and t
		{"u", "loop1", false, true}, // a chain longer than maxLinkHops
		{"a/l", "missing/../b", false, false},
	} {
		if got := LexicallyEscapes(c.name, c.target); got != c.lexical {
			t.Errorf("LexicallyEscapes(%q, %q) = %v", c.name, c.target, got)
		}
		if got := Escapes(root, c.name, c.target); got != c.escapes {
			t.Errorf("Escapes(%q, %q) = %v", c.name, c.target, got)
		}
	}
}
