package sqlite

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// A credential's value is kept out of the database and its journal files,
// in raw or encoded form, in a 0600 file of its own beside it.
func TestCredentialsOutsideTheDatabase(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	value := []byte("sk-test-" + strings.Repeat("q7", 20))
	if err := s.PutCredential(context.Background(), "anthropic", "", value); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CredentialValue(context.Background(), "anthropic"); err != nil {
		t.Fatal(err)
	}
	db := s.Path()
	// The WAL is read before Close folds it into the database.
	forms := [][]byte{value, []byte(base64.StdEncoding.EncodeToString(value))}
	noValueIn := func(paths ...string) {
		t.Helper()
		for _, p := range paths {
			raw, err := os.ReadFile(p)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			for _, f := range forms {
				if bytes.Contains(raw, f) {
					t.Errorf("%s holds the credential's value", filepath.Base(p))
				}
			}
		}
	}
	noValueIn(db, db+"-wal", db+"-shm")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	noValueIn(db, db+"-wal", db+"-shm")
	fi, err := os.Stat(CredentialsPath(db))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v, %v; want mode 0600", fi, err)
	}
	if got := filepath.Base(CredentialsPath(db)); got != "berth.credentials.json" {
		t.Fatalf("credentials file %s, want berth.credentials.json", got)
	}
}

// A credentials file that others may read, that is a symlink, or that is
// another user's is refused (EUnavailable saying what to do), for reads as
// for writes, and used again once it is fixed.
func TestCredentialsFileMustBePrivate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openAt(t, dir)
	// The store reopen left open last, not the first one.
	defer func() { s.Close() }()
	if err := s.PutCredential(ctx, "openai", "", []byte("sk-1")); err != nil {
		t.Fatal(err)
	}
	path := CredentialsPath(s.Path())
	// A fresh store on the same directory reads the file anew.
	reopen := func() *Store {
		t.Helper()
		s.Close()
		s = openAt(t, dir)
		return s
	}
	refused := func(fix string) {
		t.Helper()
		s := reopen()
		_, err := s.CredentialValue(ctx, "openai")
		if berth.ErrorCode(err) != berth.EUnavailable || !strings.Contains(err.Error(), fix) {
			t.Fatalf("value: %v; want unavailable saying %q", err, fix)
		}
		if err := s.PutCredential(ctx, "other", "", []byte("sk-2")); berth.ErrorCode(err) != berth.EUnavailable {
			t.Fatalf("put: %v; want unavailable", err)
		}
	}

	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	refused("chmod 600")
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := reopen().CredentialValue(ctx, "openai"); err != nil || string(v) != "sk-1" {
		t.Fatalf("once fixed: %q, %v", v, err)
	}

	if err := os.Rename(path, path+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(path+".real", path); err != nil {
		t.Fatal(err)
	}
	refused("regular file")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".real", path); err != nil {
		t.Fatal(err)
	}

	if os.Geteuid() == 0 {
		// Root can give the file away; another user cannot, so the case
		// is only reachable here.
		if err := os.Chown(path, 4321, 4321); err != nil {
			t.Fatal(err)
		}
		refused("not owned")
	}
}
