package live

import (
	"os"
	"path/filepath"
	"testing"
)

// A directory or file swapped for a symbolic link into the home between
// the file service looking at a path component and opening it is refused:
// what was opened is checked against what the name names.
func TestFileServiceRefusesASwapMidCall(t *testing.T) {
	ws := t.TempDir()
	home := filepath.Join(ws, "bhome")
	for _, d := range []string{filepath.Join(home, "sessions"), filepath.Join(ws, "x")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for p, text := range map[string]string{filepath.Join(home, "sessions", "secret"): "s3cret",
		filepath.Join(home, "token"): "tok-s3cret", filepath.Join(ws, "x", "secret"): "plain", filepath.Join(ws, "f"): "plain"} {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fi, err := os.Stat(home)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := idOf(fi)
	ls := &Session{workspace: ws}
	f := &ls.files
	*f = files{ls: ls, wsReal: ws, root: root, hidden: map[fileID]bool{id: true}}

	for _, c := range []struct{ rel, swap, target string }{
		{"x/secret", "x", "bhome/sessions"},
		{"f", "f", "bhome/token"},
	} {
		if file, err := f.openConfined(c.rel, os.O_RDONLY, 0, false); err != nil {
			t.Fatalf("%s before the swap: %v", c.rel, err)
		} else {
			_ = file.Close()
		}
		f.afterLstat = func(name string) {
			if name != c.swap {
				return
			}
			aside := filepath.Join(ws, c.swap+".aside")
			if err := os.Rename(filepath.Join(ws, c.swap), aside); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(c.target, filepath.Join(ws, c.swap)); err != nil {
				t.Error(err)
			}
		}
		file, err := f.openConfined(c.rel, os.O_RDONLY, 0, false)
		f.afterLstat = nil
		if err == nil {
			b := make([]byte, 64)
			n, _ := file.Read(b)
			_ = file.Close()
			t.Fatalf("%s swapped for a link to %s mid-call was opened: %q", c.rel, c.target, b[:n])
		}
		if refusal(err) == "" {
			t.Errorf("%s swapped mid-call: %v, want a refusal", c.rel, err)
		}
	}
}
