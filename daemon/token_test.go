package daemon

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Daemons starting at once on one home agree on one token; a token file
// left readable by others is made private again.
func TestEnsureTokenIsSharedAndPrivate(t *testing.T) {
	home := t.TempDir()
	toks := make([]string, 8)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() {
			tok, err := ensureToken(home)
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	for _, tok := range toks {
		if tok == "" || tok != toks[0] {
			t.Fatalf("tokens differ: %q", toks)
		}
	}
	entries, _ := os.ReadDir(home)
	if len(entries) != 1 {
		t.Errorf("home holds %d entries, want only the token (no temporary files)", len(entries))
	}
	path := filepath.Join(home, tokenName)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if tok, err := ensureToken(home); err != nil || tok != toks[0] {
		t.Fatalf("reuse = %q %v", tok, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("token mode = %v, want 0600", fi.Mode().Perm())
	}
	// A token file of whitespace is an error, not a token-less daemon.
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureToken(home); err == nil {
		t.Error("a blank token file was accepted")
	}
}

// The token's write is not synced: what a crash leaves of it (no bytes,
// or NUL bytes where its data never reached the disk) is replaced by a new
// token, private, with nothing else left in the home.
func TestATornTokenIsReplaced(t *testing.T) {
	for name, torn := range map[string][]byte{"empty": {}, "NUL bytes": make([]byte, 44)} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, tokenName)
			if err := os.WriteFile(path, torn, 0o644); err != nil {
				t.Fatal(err)
			}
			tok, err := ensureToken(home)
			if err != nil {
				t.Fatal(err)
			}
			if len(tok) != 43 || readTokenFile(home) != tok {
				t.Fatalf("token %q, file holds %q", tok, readTokenFile(home))
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
				t.Errorf("token mode = %v, want 0600", fi.Mode().Perm())
			}
			if entries, _ := os.ReadDir(home); len(entries) != 1 {
				t.Errorf("home holds %d entries, want only the token", len(entries))
			}
			if again, err := ensureToken(home); err != nil || again != tok {
				t.Fatalf("the new token is not kept: %q %v", again, err)
			}
		})
	}
}
