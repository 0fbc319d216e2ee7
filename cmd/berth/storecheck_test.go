package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A damaged or lost SQLite store stops start-up with its cause named, and
// the file is left as it was: a truncated file, one that is not a
// database, and an empty one beside the session directories of the store
// it replaced (which --accept-empty-store lets start anew).
func TestADamagedStoreStopsStartUpAndChangesNothing(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySessionWith(t, nil, "echo hi")
	if _, err := os.Stat(filepath.Join(home, "sessions", sess.ID)); err != nil {
		t.Fatalf("the session has no directory in the home: %v", err)
	}
	s.stop()
	db := filepath.Join(home, "berth.db")
	good, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{db + "-wal", db + "-shm"} {
		_ = os.Remove(f)
	}

	serve := func(args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--home", home, "--addr", freeAddr(t)}, args...)...)
		cmd.Env = cleanEnv(home)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), out.String()
	}
	for _, c := range []struct {
		name    string
		content []byte
		want    string
	}{
		{"truncated", good[:len(good)/2], "truncated"},
		{"not a database", bytes.Repeat([]byte("garbage!"), 1024), "not a SQLite database"},
		{"empty", nil, "session directories"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(db, c.content, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out := serve()
			if code != 1 || !strings.Contains(out, c.want) {
				t.Fatalf("serve exited %d, want 1 with %q:\n%s", code, c.want, out)
			}
			after, _ := os.ReadFile(db)
			if sha256.Sum256(after) != sha256.Sum256(c.content) {
				t.Error("the refused start changed the store file")
			}
			for _, f := range []string{db + "-wal", db + "-shm"} {
				if _, err := os.Stat(f); err == nil {
					t.Errorf("the refused start created %s", filepath.Base(f))
				}
			}
		})
	}

	// Told so, a new store starts beside the orphaned directories.
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, home, "--accept-empty-store")
	var list struct {
		Sessions []any `json:"sessions"`
	}
	if st, _ := s2.api("GET", "/v1/sessions", nil, &list); st != 200 || len(list.Sessions) != 0 {
		t.Fatalf("new store lists %d sessions (%d)", len(list.Sessions), st)
	}
}
