package snapshot

import (
	"context"
	"encoding/binary"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// node is what a test compares of one file system entry.
type node struct {
	Type    string // "dir", "file", "link" or "other"
	Mode    fs.FileMode
	Content string
	Link    string
	ModTime time.Time // not compared for links
}

// readTree returns every entry below dir by slash-separated relative name,
// without following symlinks.
func readTree(t testing.TB, dir string) map[string]node {
	t.Helper()
	tree := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n := node{Mode: fi.Mode().Perm(), ModTime: fi.ModTime()}
		switch {
		case fi.IsDir():
			n.Type = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			n.Type, n.Mode, n.ModTime = "link", 0, time.Time{}
			n.Link, err = os.Readlink(p)
			if err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			n.Type = "file"
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.Content = string(b)
		default:
			n.Type = "other"
		}
		tree[filepath.ToSlash(rel)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// compareTrees fails t where got and want differ.
func compareTrees(t testing.TB, got, want map[string]node) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: missing", name)
		case g.Type != w.Type || g.Mode != w.Mode || g.Link != w.Link:
			t.Errorf("%s: got %s %v link %q, want %s %v link %q", name, g.Type, g.Mode, g.Link, w.Type, w.Mode, w.Link)
		case g.Content != w.Content:
			t.Errorf("%s: content differs (%d bytes, want %d)", name, len(g.Content), len(w.Content))
		case !g.ModTime.Equal(w.ModTime):
			t.Errorf("%s: mtime %v, want %v", name, g.ModTime, w.ModTime)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: unexpected", name)
		}
	}
}

// makeWritable gives the owner full access to every directory below dir, so
// that the test's temporary directories can be removed when not root.
func makeWritable(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
}

// must fails t on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeFile writes a file below dir with mode and mtime.
func writeFile(t testing.TB, dir, name, content string, mode fs.FileMode, mtime time.Time) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o600))
	must(t, os.Chmod(p, mode))
	must(t, os.Chtimes(p, mtime, mtime))
}

// buildWorkspace makes a workspace with nested and empty directories,
// symlinks, unicode names, a 5 MiB file and various modes, plus entries
// Create must leave out, which it returns by name.
func buildWorkspace(t testing.TB) (ws string, skipped []string) {
	t.Helper()
	base := t.TempDir()
	ws = filepath.Join(base, "ws")
	must(t, os.Mkdir(ws, 0o755))
	must(t, os.WriteFile(filepath.Join(base, "outside.txt"), []byte("outside"), 0o644))

	mt := time.Date(2024, 3, 1, 12, 30, 45, 123456789, time.UTC)
	writeFile(t, ws, "a/b/c/file.txt", "hello\n", 0o644, mt)
	writeFile(t, ws, "a/b/secret", "s3cret", 0o600, mt.Add(time.Second))
	writeFile(t, ws, "ünïcødé/日本語.txt", "こんにちは", 0o644, mt.Add(2*time.Second))
	writeFile(t, ws, "emoji 🚀 name.md", "# 🚀", 0o640, mt.Add(3*time.Second))
	writeFile(t, ws, "run.sh", "#!/bin/sh\necho hi\n", 0o755, mt.Add(4*time.Second))
	writeFile(t, ws, "ro.txt", "read only", 0o444, mt.Add(5*time.Second))
	writeFile(t, ws, "empty.txt", "", 0o644, mt.Add(6*time.Second))
	big := make([]byte, 5<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(big); i += 8 {
		// Four random bits a byte: compressible, but not trivially.
		binary.LittleEndian.PutUint64(big[i:], r.Uint64()&0x0f0f0f0f0f0f0f0f)
	}
	writeFile(t, ws, "data/big.bin", string(big), 0o644, mt.Add(7*time.Second))
	must(t, os.MkdirAll(filepath.Join(ws, "empty"), 0o755))
	must(t, os.MkdirAll(filepath.Join(ws, "deep/x/y"), 0o755))
	must(t, os.Symlink("b/c/file.txt", filepath.Join(ws, "a/link")))
	must(t, os.Symlink("a", filepath.Join(ws, "dlink")))
	must(t, os.Symlink("../../run.sh", filepath.Join(ws, "a/b/up")))
	must(t, os.Symlink("not-there", filepath.Join(ws, "dangling")))
	must(t, os.Symlink(".", filepath.Join(ws, "self")))

	// Left out: a FIFO, an absolute symlink, a symlink leaving the
	// workspace, and one that leaves only through another symlink.
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	must(t, os.Symlink("/etc/passwd", filepath.Join(ws, "abs")))
	must(t, os.Symlink("../outside.txt", filepath.Join(ws, "esc")))
	must(t, os.Symlink("self/..", filepath.Join(ws, "sneaky")))
	skipped = []string{"fifo", "abs", "esc", "sneaky"}

	// Directory modes and times last, after everything inside is made.
	must(t, os.Chmod(filepath.Join(ws, "a/b"), 0o750))
	must(t, os.Chmod(filepath.Join(ws, "deep/x"), 0o555))
	t.Cleanup(func() { makeWritable(ws) })
	for i, d := range []string{"a/b/c", "a/b", "a", "ünïcødé", "data", "empty", "deep/x/y", "deep/x", "deep"} {
		dt := mt.Add(time.Duration(i+10) * time.Minute)
		must(t, os.Chtimes(filepath.Join(ws, d), dt, dt))
	}
	return ws, skipped
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	ws, skipped := buildWorkspace(t)
	want := readTree(t, ws)
	for _, name := range skipped {
		delete(want, name)
	}

	s := New(t.TempDir())
	snap, err := s.Create(ctx, "ses_1", ws)
	must(t, err)
	if snap.Files != len(want) || snap.Skipped != len(skipped) {
		t.Errorf("Files, Skipped = %d, %d; want %d, %d", snap.Files, snap.Skipped, len(want), len(skipped))
	}
	if !strings.HasPrefix(snap.ID, "snap_") || snap.SessionID != "ses_1" || snap.SizeBytes <= 0 || snap.SizeBytes >= 5<<20 {
		t.Errorf("snapshot = %+v", snap)
	}

	t.Run("new dst", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "restored")
		t.Cleanup(func() { makeWritable(dst) })
		must(t, s.Restore(ctx, snap.ID, dst))
		compareTrees(t, readTree(t, dst), want)
	})
	t.Run("existing empty dst", func(t *testing.T) {
		dst := t.TempDir()
		t.Cleanup(func() { makeWritable(dst) })
		must(t, os.Chmod(dst, 0o751))
		must(t, s.Restore(ctx, snap.ID, dst))
		compareTrees(t, readTree(t, dst), want)
		if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o751 {
			t.Errorf("dst mode changed: %v %v", fi.Mode(), err)
		}
		b, err := os.ReadFile(filepath.Join(dst, "a/link"))
		if err != nil || string(b) != "hello\n" {
			t.Errorf("a/link reads %q, %v", b, err)
		}
	})
	t.Run("non-empty dst", func(t *testing.T) {
		dst := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dst, "keep"), []byte("x"), 0o644))
		err := s.Restore(ctx, snap.ID, dst)
		if !berth.IsCode(err, berth.EConflict) {
			t.Fatalf("Restore into non-empty dir: %v, want %s", err, berth.EConflict)
		}
		if got := readTree(t, dst); len(got) != 1 {
			t.Errorf("dst holds %v", got)
		}
	})
	t.Run("dst is a file", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "f")
		must(t, os.WriteFile(dst, nil, 0o644))
		if err := s.Restore(ctx, snap.ID, dst); !berth.IsCode(err, berth.EInvalid) {
			t.Fatalf("Restore onto a file: %v, want %s", err, berth.EInvalid)
		}
	})
	t.Run("dst parent missing", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "no", "dst")
		if err := s.Restore(ctx, snap.ID, dst); !berth.IsCode(err, berth.EInvalid) {
			t.Fatalf("Restore below a missing dir: %v, want %s", err, berth.EInvalid)
		}
	})
}

func TestCreateRefusesBadWorkspace(t *testing.T) {
	ctx := context.Background()
	s := New(t.TempDir())
	if _, err := s.Create(ctx, "ses_1", filepath.Join(t.TempDir(), "nope")); !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("missing workspace: %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(f, nil, 0o644))
	if _, err := s.Create(ctx, "ses_1", f); !berth.IsCode(err, berth.EInvalid) {
		t.Errorf("file workspace: %v", err)
	}
	for _, id := range []string{"", "..", ".hidden", "a/b", "a\\b", strings.Repeat("x", 129)} {
		if _, err := s.Create(ctx, id, t.TempDir()); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("session id %q: %v", id, err)
		}
	}
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	writeFile(t, ws, "a.txt", strings.Repeat("a", 600), 0o644, time.Now())
	writeFile(t, ws, "b.txt", strings.Repeat("b", 600), 0o644, time.Now())
	dir := t.TempDir()

	small := NewWithOptions(dir, Options{MaxBytes: 1000})
	if _, err := small.Create(ctx, "ses_1", ws); !berth.IsCode(err, berth.ETooLarge) {
		t.Errorf("Create over MaxBytes: %v, want %s", err, berth.ETooLarge)
	}
	few := NewWithOptions(dir, Options{MaxEntries: 1})
	if _, err := few.Create(ctx, "ses_1", ws); !berth.IsCode(err, berth.ETooLarge) {
		t.Errorf("Create over MaxEntries: %v, want %s", err, berth.ETooLarge)
	}
	assertNoFiles(t, filepath.Join(dir, "ses_1"))

	snap, err := New(dir).Create(ctx, "ses_1", ws)
	must(t, err)
	for _, s := range []*Store{small, few} {
		dst := filepath.Join(t.TempDir(), "dst")
		if err := s.Restore(ctx, snap.ID, dst); !berth.IsCode(err, berth.ETooLarge) {
			t.Errorf("Restore over limits: %v, want %s", err, berth.ETooLarge)
		}
		if _, err := os.Lstat(dst); !os.IsNotExist(err) {
			t.Errorf("dst left behind: %v", err)
		}
	}
}

// assertNoFiles fails t if dir holds any file (a missing dir holds none).
func assertNoFiles(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left in %s: %s", dir, e.Name())
	}
}

// countdownCtx is a context whose Err turns context.Canceled after n calls,
// to cancel an operation part way through, deterministically.
type countdownCtx struct {
	context.Context
	n int
}

// Err implements context.Context.
func (c *countdownCtx) Err() error {
	c.n--
	if c.n < 0 {
		return context.Canceled
	}
	return nil
}

func TestCreateCancelled(t *testing.T) {
	ws, _ := buildWorkspace(t)
	for i := range 20 {
		writeFile(t, ws, "many/f"+string(rune('a'+i)), strings.Repeat("x", i*1000), 0o644, time.Now())
	}
	dir := t.TempDir()
	s := New(dir)
	for _, n := range []int{0, 1, 3, 10, 30, 100, 150} {
		ctx := &countdownCtx{Context: context.Background(), n: n}
		snap, err := s.Create(ctx, "ses_1", ws)
		if err != context.Canceled {
			t.Fatalf("cancelled after %d checks: %+v, %v", n, snap, err)
		}
		assertNoFiles(t, filepath.Join(dir, "ses_1"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Create(ctx, "ses_1", ws); err != context.Canceled {
		t.Fatalf("Create with a cancelled ctx: %v", err)
	}
	assertNoFiles(t, filepath.Join(dir, "ses_1"))
	// The store still works.
	if _, err := s.Create(context.Background(), "ses_1", ws); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreCancelled(t *testing.T) {
	ws, _ := buildWorkspace(t)
	s := New(t.TempDir())
	snap, err := s.Create(context.Background(), "ses_1", ws)
	must(t, err)
	for _, n := range []int{2, 5, 20} {
		parent := t.TempDir()
		dst := filepath.Join(parent, "dst")
		ctx := &countdownCtx{Context: context.Background(), n: n}
		if err := s.Restore(ctx, snap.ID, dst); err != context.Canceled {
			t.Fatalf("cancelled after %d checks: %v", n, err)
		}
		assertNoFiles(t, parent)
	}
}
