package checkpoint

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// write makes a file (and its directories) under dir.
func write(t *testing.T, dir, rel, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// tree describes a directory: path → "d MODE", "f MODE content" or "l target".
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "l " + target
		case fi.IsDir():
			out[rel] = "d " + fi.Mode().Perm().String()
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out[rel] = "f " + fi.Mode().Perm().String() + " " + string(b)
		default:
			out[rel] = "special"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diff lists the paths where a and b differ.
func diff(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k+": "+v+" ≠ "+b[k])
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k+": (none) ≠ "+v)
		}
	}
	slices.Sort(out)
	return out
}

func newStore(t *testing.T, opts Options) *Store {
	t.Helper()
	return New(filepath.Join(t.TempDir(), "checkpoints"), opts)
}

// TestRestoreIsExact: created files are removed, changed ones restored,
// deleted ones recreated, modes and inside symlinks back, a directory
// replaced by a file (and the reverse) undone; what a checkpoint skips is
// listed and left alone.
func TestRestoreIsExact(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	outside := t.TempDir()
	write(t, ws, "a.txt", "alpha", 0o644)
	write(t, ws, "bin/run.sh", "#!/bin/sh\n", 0o755)
	write(t, ws, "src/deep/x.go", "package x", 0o600)
	write(t, ws, "src/keep/y.go", "package y", 0o644)
	write(t, ws, ".gitignore", "build/\n*.log\n", 0o644)
	write(t, ws, "build/out.o", "object", 0o644)
	write(t, ws, "debug.log", "log v1", 0o644)
	write(t, ws, ".git/HEAD", "ref: refs/heads/main", 0o644)
	write(t, ws, "big.bin", strings.Repeat("z", 2048), 0o644)
	write(t, outside, "secret", "do not touch", 0o600)
	must(t, os.Symlink("src/deep/x.go", filepath.Join(ws, "link")))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "out-link")))
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))

	s := newStore(t, Options{MaxFileBytes: 1024})
	c, err := s.Create(ctx, "ses_a", "turn_1", ws)
	if err != nil {
		t.Fatal(err)
	}
	if c.Files != 5 || c.Bytes != int64(len("alpha#!/bin/sh\npackage xpackage y")+len("build/\n*.log\n")) {
		t.Fatalf("files %d bytes %d", c.Files, c.Bytes)
	}
	reasons := map[string]string{}
	for _, sk := range c.Skipped {
		reasons[sk.Path] = sk.Reason
	}
	want := map[string]string{"build": SkipGitignore, "debug.log": SkipGitignore, ".git": SkipVCS,
		"big.bin": SkipTooLarge, "out-link": SkipLinkOutside, "fifo": SkipSpecial}
	for p, r := range want {
		if reasons[p] != r {
			t.Errorf("skip %s: %q, want %q (all: %v)", p, reasons[p], r, c.Skipped)
		}
	}
	if c.SkippedTotal != len(want) {
		t.Errorf("skipped_total %d", c.SkippedTotal)
	}
	before := tree(t, ws)

	// The agent's turn.
	write(t, ws, "a.txt", "ALPHA changed", 0o644)
	must(t, os.Remove(filepath.Join(ws, "bin/run.sh")))
	must(t, os.Chmod(filepath.Join(ws, "src/keep/y.go"), 0o666))
	write(t, ws, "new.txt", "created", 0o644)
	write(t, ws, "newdir/sub/n.txt", "created", 0o644)
	must(t, os.RemoveAll(filepath.Join(ws, "src/deep")))
	write(t, ws, "src/deep", "now a file", 0o644)
	must(t, os.Remove(filepath.Join(ws, "link")))
	must(t, os.Symlink("a.txt", filepath.Join(ws, "link")))
	write(t, ws, "debug.log", "log v2", 0o644)
	write(t, ws, ".git/HEAD", "ref: refs/heads/other", 0o644)
	write(t, ws, "build/new.o", "new object", 0o644)

	res, err := s.Restore(ctx, "ses_a", c.ID, ws)
	if err != nil {
		t.Fatal(err)
	}
	after := tree(t, ws)
	// Skipped paths keep their current state.
	for _, p := range []string{"debug.log", ".git/HEAD", "build/new.o"} {
		if after[p] == before[p] && p != "build/new.o" {
			t.Errorf("%s was rewound though it is skipped", p)
		}
		delete(after, p)
		delete(before, p)
	}
	if d := diff(before, after); len(d) > 0 {
		t.Fatalf("not restored exactly:\n%s", strings.Join(d, "\n"))
	}
	if res.Removed == 0 || res.Written == 0 {
		t.Fatalf("result %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "do not touch" {
		t.Fatal("outside file changed")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnchangedFilesAreNotRead: a second checkpoint reads only the file
// that changed, and writes no blob for the others.
func TestUnchangedFilesAreNotRead(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	for i := range 100 {
		write(t, ws, filepath.Join("d", string(rune('a'+i%26)), strings.Repeat("f", 1+i/26)), "content "+string(rune('a'+i%26))+strings.Repeat("!", i), 0o644)
	}
	s := newStore(t, Options{})
	if _, err := s.Create(ctx, "ses_a", "t1", ws); err != nil {
		t.Fatal(err)
	}
	if n := s.reads.Load(); n != 100 {
		t.Fatalf("first checkpoint read %d files", n)
	}
	blobs := countBlobs(t, s)
	// A restarted daemon (the manifest read from disk), then the same one
	// (from memory): each reads only the one file changed.
	s2 := New(s.dir, Options{})
	for i, st := range []*Store{s2, s} {
		write(t, ws, "d/a/f", "changed "+string(rune('0'+i)), 0o644)
		st.reads.Store(0)
		if _, err := st.Create(ctx, "ses_a", "t2", ws); err != nil {
			t.Fatal(err)
		}
		if n := st.reads.Load(); n != 1 {
			t.Fatalf("checkpoint %d read %d files, want 1", i, n)
		}
	}
	if n := countBlobs(t, s); n != blobs+2 {
		t.Fatalf("blobs %d → %d", blobs, n)
	}
	list, err := s.List("ses_a")
	if err != nil || len(list) != 3 || list[0].TurnID != "t1" {
		t.Fatalf("list %v %v", list, err)
	}
}

func countBlobs(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(s.blobDir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestRestoreNeverFollowsPlantedLinks: a directory or a file of the
// checkpoint replaced by a symlink to outside is replaced back, and
// nothing outside is written.
func TestRestoreNeverFollowsPlantedLinks(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	outside := t.TempDir()
	write(t, ws, "d/f.txt", "inside", 0o644)
	write(t, ws, "g.txt", "g", 0o644)
	write(t, outside, "g.txt", "outside g", 0o644)
	s := newStore(t, Options{})
	c, err := s.Create(ctx, "ses_a", "t1", ws)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.RemoveAll(filepath.Join(ws, "d")))
	must(t, os.Symlink(outside, filepath.Join(ws, "d")))
	must(t, os.Remove(filepath.Join(ws, "g.txt")))
	must(t, os.Symlink(filepath.Join(outside, "g.txt"), filepath.Join(ws, "g.txt")))
	if _, err := s.Restore(ctx, "ses_a", c.ID, ws); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, outside); len(got) != 1 || got["g.txt"] != "f -rw-r--r-- outside g" {
		t.Fatalf("outside changed: %v", got)
	}
	if got := tree(t, ws); got["d"] != "d -rwxr-xr-x" || got["d/f.txt"] != "f -rw-r--r-- inside" || got["g.txt"] != "f -rw-r--r-- g" {
		t.Fatalf("workspace: %v", got)
	}
}

// TestBadManifestIsRefused: a manifest with "..", an absolute path, an
// escaping symlink or a path below no directory restores nothing.
func TestBadManifestIsRefused(t *testing.T) {
	ctx := context.Background()
	for _, line := range []string{
		`{"p":"../evil","k":"file","m":420,"s":0,"h":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`,
		`{"p":"/etc/evil","k":"file","m":420,"s":0,"h":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`,
		`{"p":"a/../../evil","k":"dir","m":493}`,
		`{"p":"l","k":"symlink","t":"../../etc"}`,
		`{"p":"nodir/f","k":"file","m":420,"s":0,"h":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`,
		`{"p":"f","k":"file","m":420,"s":0,"h":"../../x"}`,
	} {
		ws := filepath.Join(t.TempDir(), "ws")
		must(t, os.Mkdir(ws, 0o755))
		s := newStore(t, Options{})
		c, err := s.Create(ctx, "ses_a", "t1", ws)
		if err != nil {
			t.Fatal(err)
		}
		must(t, os.WriteFile(s.entriesPath("ses_a", c.ID), []byte(`{"v":1}`+"\n"+line+"\n"), 0o600))
		_, err = s.Restore(ctx, "ses_a", c.ID, ws)
		if berth.ErrorCode(err) != berth.EInternal {
			t.Fatalf("%s: err %v", line, err)
		}
		if ents, _ := os.ReadDir(filepath.Dir(ws)); len(ents) != 1 {
			t.Fatalf("%s: something was written beside the workspace", line)
		}
	}
}

// TestHardLinksAreReadOnce: a workspace of hard links to one file reads it
// once and restores every name.
func TestHardLinksAreReadOnce(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	write(t, ws, "orig", "shared content", 0o644)
	for i := range 50 {
		must(t, os.Link(filepath.Join(ws, "orig"), filepath.Join(ws, "l"+strings.Repeat("x", i+1))))
	}
	s := newStore(t, Options{})
	c, err := s.Create(ctx, "ses_a", "t1", ws)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.reads.Load(); n != 1 || c.Files != 51 {
		t.Fatalf("read %d, files %d", n, c.Files)
	}
	write(t, ws, "orig", "changed through every link", 0o644)
	if _, err := s.Restore(ctx, "ses_a", c.ID, ws); err != nil {
		t.Fatal(err)
	}
	for p, v := range tree(t, ws) {
		if v != "f -rw-r--r-- shared content" {
			t.Fatalf("%s: %s", p, v)
		}
	}
}

// TestTotalLimitSkipsNotFails: files past max_total_bytes are skipped and
// listed; the checkpoint is made.
func TestTotalLimitSkipsNotFails(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "a", strings.Repeat("a", 600), 0o644)
	write(t, ws, "b", strings.Repeat("b", 600), 0o644)
	s := newStore(t, Options{MaxTotalBytes: 1000})
	c, err := s.Create(context.Background(), "ses_a", "t1", ws)
	if err != nil {
		t.Fatal(err)
	}
	if c.Files != 1 || c.Bytes != 600 || len(c.Skipped) != 1 || c.Skipped[0] != (Skip{Path: "b", Reason: SkipTotal}) {
		t.Fatalf("%+v", c)
	}
}

// TestDeleteKeepsSharedBlobs: deleting one session's checkpoints keeps the
// blobs another session's need; deleting both frees them all.
func TestDeleteKeepsSharedBlobs(t *testing.T) {
	ctx := context.Background()
	wsA, wsB := t.TempDir(), t.TempDir()
	write(t, wsA, "shared", "same bytes", 0o644)
	write(t, wsA, "onlyA", "a only", 0o644)
	write(t, wsB, "shared", "same bytes", 0o644)
	s := newStore(t, Options{})
	if _, err := s.Create(ctx, "ses_a", "t1", wsA); err != nil {
		t.Fatal(err)
	}
	cb, err := s.Create(ctx, "ses_b", "t1", wsB)
	if err != nil {
		t.Fatal(err)
	}
	if n := countBlobs(t, s); n != 2 {
		t.Fatalf("blobs %d", n)
	}
	must(t, s.Delete("ses_a"))
	if n := countBlobs(t, s); n != 1 {
		t.Fatalf("after delete: %d blobs", n)
	}
	write(t, wsB, "shared", "changed", 0o644)
	if _, err := s.Restore(ctx, "ses_b", cb.ID, wsB); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(wsB, "shared")); string(b) != "same bytes" {
		t.Fatalf("shared: %q", b)
	}
	if l, _ := s.List("ses_a"); len(l) != 0 {
		t.Fatal("ses_a still lists checkpoints")
	}
	// A temporary blob a crash left goes with the sweep of the next
	// daemon's store; a delete removes only the session's own blobs.
	must(t, os.WriteFile(filepath.Join(s.blobDir(), tempPrefix+"crashed"), []byte("x"), 0o600))
	must(t, s.Delete("ses_b"))
	if n := countBlobs(t, s); n != 1 {
		t.Fatalf("after both: %d blobs", n)
	}
	if _, err := New(s.dir, Options{}).Sweep(); err != nil {
		t.Fatal(err)
	}
	if n := countBlobs(t, s); n != 0 {
		t.Fatalf("after a sweep: %d blobs", n)
	}
}

// TestForkCopyIntoEmptyDir: restoring into an empty directory copies the
// checkpoint.
func TestForkCopyIntoEmptyDir(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	write(t, ws, "x/y", "why", 0o640)
	must(t, os.Symlink("x/y", filepath.Join(ws, "l")))
	s := newStore(t, Options{})
	c, err := s.Create(ctx, "ses_a", "t1", ws)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if _, err := s.Restore(ctx, "ses_a", c.ID, dst); err != nil {
		t.Fatal(err)
	}
	if d := diff(tree(t, ws), tree(t, dst)); len(d) > 0 {
		t.Fatal(d)
	}
}

// TestEveryCheckpointOfAChainRestores: manifests are deltas on the one
// before (a full one every maxChain); each of 40 checkpoints, read back by
// a fresh store, restores its own state exactly, and the manifests stay
// small.
func TestEveryCheckpointOfAChainRestores(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	for i := range 200 {
		write(t, ws, filepath.Join("d", string(rune('a'+i%10)), "f"+strings.Repeat("x", i/10)), "v0", 0o644)
	}
	s := newStore(t, Options{})
	var ids []string
	var trees []map[string]string
	for r := range 40 {
		write(t, ws, filepath.Join("d", "a", "f"), "round "+string(rune('A'+r)), 0o644)
		write(t, ws, filepath.Join("new", string(rune('a'+r))), "added", 0o600)
		if r%3 == 0 {
			must(t, os.RemoveAll(filepath.Join(ws, "new")))
		}
		c, err := s.Create(ctx, "ses_a", "t", ws)
		if err != nil {
			t.Fatal(err)
		}
		ids, trees = append(ids, c.ID), append(trees, tree(t, ws))
	}
	full, deltas := 0, 0
	for _, id := range ids {
		h, entries, err := s.readEntries(s.entriesPath("ses_a", id))
		if err != nil {
			t.Fatal(err)
		}
		if h.Base == "" {
			full++
		} else {
			deltas++
			if len(entries) > 10 {
				t.Fatalf("delta %s has %d entries", id, len(entries))
			}
		}
	}
	if full != 2 || deltas != 38 {
		t.Fatalf("%d full manifests, %d deltas", full, deltas)
	}
	fresh := New(s.dir, Options{})
	for i := len(ids) - 1; i >= 0; i -= 7 {
		if _, err := fresh.Restore(ctx, "ses_a", ids[i], ws); err != nil {
			t.Fatal(err)
		}
		if d := diff(trees[i], tree(t, ws)); len(d) > 0 {
			t.Fatalf("checkpoint %d: %v", i, d)
		}
	}
}

// TestGitignoreChangeIsSeen: a path kept by one checkpoint is skipped by
// the next once a .gitignore (here a nested one) names it, and kept again
// once it no longer does.
func TestGitignoreChangeIsSeen(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	write(t, ws, "src/gen.out", "generated", 0o644)
	write(t, ws, "src/main.go", "package main", 0o644)
	s := newStore(t, Options{})
	skipped := func() []string {
		t.Helper()
		c, err := s.Create(ctx, "ses_a", "t", ws)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sk := range c.Skipped {
			out = append(out, sk.Path+":"+sk.Reason)
		}
		return out
	}
	if got := skipped(); len(got) != 0 {
		t.Fatalf("first: %v", got)
	}
	write(t, ws, "src/.gitignore", "*.out\n", 0o644)
	if got := skipped(); !slices.Equal(got, []string{"src/gen.out:" + SkipGitignore}) {
		t.Fatalf("after .gitignore: %v", got)
	}
	write(t, ws, "src/.gitignore", "*.tmp\n", 0o644)
	if got := skipped(); len(got) != 0 {
		t.Fatalf("after the change: %v", got)
	}
}

// TestRestoreNeverFollowsLinksInside: links planted inside the workspace
// (a directory of the checkpoint swapped for a link to another directory,
// a file for a link to another file) are replaced, and what they point at
// is not written.
func TestRestoreNeverFollowsLinksInside(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	write(t, ws, "d/f.txt", "d's f", 0o644)
	write(t, ws, "e/keep.txt", "e's", 0o644)
	write(t, ws, "g.txt", "g", 0o644)
	write(t, ws, "h.txt", "h", 0o644)
	s := newStore(t, Options{})
	c, err := s.Create(ctx, "ses_a", "t1", ws)
	if err != nil {
		t.Fatal(err)
	}
	want := tree(t, ws)
	must(t, os.RemoveAll(filepath.Join(ws, "d")))
	must(t, os.Symlink("e", filepath.Join(ws, "d")))
	must(t, os.Remove(filepath.Join(ws, "g.txt")))
	must(t, os.Symlink("h.txt", filepath.Join(ws, "g.txt")))
	if _, err := s.Restore(ctx, "ses_a", c.ID, ws); err != nil {
		t.Fatal(err)
	}
	if d := diff(want, tree(t, ws)); len(d) > 0 {
		t.Fatalf("after restore: %v", d)
	}
}

// TestCopyTree: a copy keeps files, modes and inside links, and leaves out
// links that leave and special files.
func TestCopyTree(t *testing.T) {
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, src, ".demo/conv.jsonl", "history", 0o600)
	write(t, src, "bin/tool", "#!/bin/sh", 0o755)
	write(t, outside, "secret", "no", 0o600)
	must(t, os.Symlink("bin/tool", filepath.Join(src, "tool")))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "leak")))
	must(t, os.Symlink(outside, filepath.Join(src, "outdir")))
	must(t, syscall.Mkfifo(filepath.Join(src, "fifo"), 0o600))
	skipped, err := newStore(t, Options{}).CopyTree(context.Background(), src, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := tree(t, src)
	for _, p := range []string{"leak", "outdir", "fifo"} {
		delete(want, p)
	}
	if d := diff(want, tree(t, dst)); len(d) > 0 {
		t.Fatal(d)
	}
	if len(skipped) != 3 {
		t.Fatalf("skipped %v", skipped)
	}
}

// TestChangeWithOldMtimeIsSeen: a file rewritten in place with the same
// size and its old mtime set back (what `touch -d` does) is read again:
// ctime cannot be set back, and it is part of the key.
func TestChangeWithOldMtimeIsSeen(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	write(t, ws, "f", "aaaa", 0o644)
	fi, err := os.Stat(filepath.Join(ws, "f"))
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, Options{})
	if _, err := s.Create(ctx, "ses_a", "t1", ws); err != nil {
		t.Fatal(err)
	}
	ctimeOf := func() int64 {
		st, err := os.Lstat(filepath.Join(ws, "f"))
		if err != nil {
			t.Fatal(err)
		}
		return entryOf("f", st).CTime
	}
	c0 := ctimeOf()
	// Rewritten until the clock gives it another ctime (its tick can be
	// coarser than a write).
	for deadline := time.Now().Add(5 * time.Second); ; {
		f, err := os.OpenFile(filepath.Join(ws, "f"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("bbbb"), 0); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		must(t, os.Chtimes(filepath.Join(ws, "f"), fi.ModTime(), fi.ModTime()))
		if ctimeOf() != c0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ctime never changed")
		}
	}
	s.reads.Store(0)
	c, err := s.Create(ctx, "ses_a", "t2", ws)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.reads.Load(); n != 1 {
		t.Fatalf("the hidden change was not read (%d reads)", n)
	}
	write(t, ws, "f", "cccc", 0o644)
	if _, err := s.Restore(ctx, "ses_a", c.ID, ws); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "bbbb" {
		t.Fatalf("restored %q", b)
	}
}

// TestConcurrentDeletesAllSucceed: sessions deleted at once each sweep
// while the others' directories vanish; none of them fails for it, and
// every blob goes.
func TestConcurrentDeletesAllSucceed(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{})
	const n = 24
	for i := range n {
		ws := t.TempDir()
		id := fmt.Sprintf("ses_%02d", i)
		for j := range 3 {
			write(t, ws, fmt.Sprintf("f%d", j), fmt.Sprintf("%s %d", id, j), 0o644)
			if _, err := s.Create(ctx, id, fmt.Sprintf("t%d", j), ws); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- s.Delete(fmt.Sprintf("ses_%02d", i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("delete: %v", err)
		}
	}
	if c := countBlobs(t, s); c != 0 {
		t.Fatalf("%d blobs left", c)
	}
}

// TestDeepTreesAreBounded: a directory chain deeper than MaxDepth, or a
// path longer than MaxPathBytes, is cut there (listed as too_deep) rather
// than walked holding a descriptor per level and a path per entry that
// grows with the depth; paths past MaxPathTotalBytes are total_limit. A
// fork of the checkpoint holds what was kept.
func TestDeepTreesAreBounded(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	deep := strings.Repeat("d/", MaxDepth+3)
	write(t, ws, deep+"bottom.txt", "bottom", 0o644)
	write(t, ws, "d/d/top.txt", "top", 0o644)
	long := strings.Repeat(strings.Repeat("n", 250)+"/", 20)
	r, err := os.OpenRoot(ws)
	must(t, err)
	defer r.Close()
	// Past PATH_MAX: made below the workspace's descriptor.
	must(t, r.MkdirAll("long/"+long, 0o755))
	must(t, r.WriteFile("long/"+long+"f.txt", []byte("far"), 0o644))
	s := newStore(t, Options{})
	c, err := s.Create(ctx, "ses_a", "t1", ws)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, sk := range c.Skipped {
		reasons[sk.Path] = sk.Reason
	}
	if r := reasons[strings.Repeat("d/", MaxDepth)+"d"]; r != SkipTooDeep {
		t.Errorf("the level past MaxDepth: %q, skipped %v", r, c.Skipped)
	}
	m, err := s.readManifest("ses_a", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	cut := false
	for _, e := range m.entries {
		if strings.Count(e.Path, "/") >= MaxDepth+1 || len(e.Path) > MaxPathBytes {
			t.Fatalf("kept %d levels, %d bytes: %.80s…", strings.Count(e.Path, "/")+1, len(e.Path), e.Path)
		}
		if strings.HasPrefix(e.Path, "long/") && len(e.Path) > MaxPathBytes-260 {
			cut = true
		}
	}
	if !cut || c.SkippedTotal != 2 {
		t.Fatalf("the long chain was not kept up to MaxPathBytes (cut %v) or skips %d: %v", cut, c.SkippedTotal, c.Skipped)
	}
	fork := t.TempDir()
	if _, err := s.Restore(ctx, "ses_a", c.ID, fork); err != nil {
		t.Fatal(err)
	}
	if readTo(t, fork, "d/d/top.txt") != "top" || readTo(t, fork, strings.Repeat("d/", MaxDepth)+"x") != "" {
		t.Fatal("the fork does not hold what was kept")
	}

	// The sum of the paths is bounded too.
	small := newStore(t, Options{MaxPathTotalBytes: 100})
	c, err = small.Create(ctx, "ses_b", "t1", ws)
	if err != nil {
		t.Fatal(err)
	}
	if c.Files != 0 || c.SkippedTotal == 0 || c.Skipped[len(c.Skipped)-1].Reason != SkipTotal {
		t.Fatalf("path budget ignored: %+v", c)
	}
}

// readTo reads rel under dir; "" when it is missing.
func readTo(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestRestoreOfManyDirectoriesKeepsFewOpen: a rewind of a workspace of
// many directories does not hold one descriptor per directory (which an
// agent could use to starve the daemon of them): it succeeds with a
// descriptor limit well under the directory count.
func TestRestoreOfManyDirectoriesKeepsFewOpen(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	const dirs = 400
	for i := range dirs {
		write(t, ws, fmt.Sprintf("d%03d/sub/f.txt", i), "before", 0o644)
	}
	s := newStore(t, Options{})
	c, err := s.Create(ctx, "ses_a", "t1", ws)
	if err != nil {
		t.Fatal(err)
	}
	for i := range dirs {
		write(t, ws, fmt.Sprintf("d%03d/sub/f.txt", i), "after", 0o644)
		write(t, ws, fmt.Sprintf("d%03d/sub/new.txt", i), "new", 0o644)
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count open descriptors: %v", err)
	}
	var old syscall.Rlimit
	must(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old))
	low := old
	low.Cur = uint64(len(open) + dirs/2)
	must(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low))
	_, err = s.Restore(ctx, "ses_a", c.ID, ws)
	must(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old))
	if err != nil {
		t.Fatalf("restore under a limit of %d descriptors: %v", low.Cur, err)
	}
	for i := range dirs {
		if got := readTo(t, ws, fmt.Sprintf("d%03d/sub/f.txt", i)); got != "before" {
			t.Fatalf("d%03d: %q", i, got)
		}
		if got := readTo(t, ws, fmt.Sprintf("d%03d/sub/new.txt", i)); got != "" {
			t.Fatalf("d%03d/sub/new.txt left", i)
		}
	}
}

// TestHugeDirectoryIsNotReadWhole: a directory whose listing is over
// MaxListBytes (an agent's million files) is left out whole as
// total_limit, without holding its listing; its neighbours are kept.
func TestHugeDirectoryIsNotReadWhole(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "keep.txt", "k", 0o644)
	must(t, os.Mkdir(filepath.Join(ws, "huge"), 0o755))
	const limit = 64 << 10
	for i := range limit/(10+listCost) + listBatch {
		f, err := os.Create(filepath.Join(ws, "huge", fmt.Sprintf("f%09d", i)))
		must(t, err)
		must(t, f.Close())
	}
	s := newStore(t, Options{MaxListBytes: limit})
	c, err := s.Create(context.Background(), "ses_a", "t1", ws)
	if err != nil {
		t.Fatal(err)
	}
	if c.Files != 1 || c.SkippedTotal != 1 || c.Skipped[0] != (Skip{Path: "huge", Reason: SkipTotal}) {
		t.Fatalf("files %d, skipped %d: %.200v", c.Files, c.SkippedTotal, c.Skipped)
	}
}

// TestWorkspaceReachedThroughALinkIsRefused: a workspace whose path now
// goes through a symbolic link (a parent session's agent replaced its
// child's workspace with a link to a host directory) is neither read by a
// checkpoint nor written by a restore: the host directory is untouched.
func TestWorkspaceReachedThroughALinkIsRefused(t *testing.T) {
	ctx := context.Background()
	parent, host := t.TempDir(), t.TempDir()
	write(t, host, "shadow", "host secret", 0o600)
	write(t, host, "child/x", "host x", 0o600)
	ws := filepath.Join(parent, "child")
	write(t, ws, "passwd", "agent's", 0o644)
	s := newStore(t, Options{})
	c, err := s.Create(ctx, "ses_a", "t1", ws)
	must(t, err)
	// The parent's agent swaps the child's workspace, and a directory above it.
	must(t, os.Rename(ws, ws+".old"))
	must(t, os.Symlink(host, ws))
	if _, err := s.Create(ctx, "ses_a", "t2", ws); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("a checkpoint through the link: %v", err)
	}
	if _, err := s.Restore(ctx, "ses_a", c.ID, ws); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("a restore through the link: %v", err)
	}
	must(t, os.Remove(ws))
	must(t, os.Rename(ws+".old", ws))
	must(t, os.Rename(parent, parent+".real"))
	t.Cleanup(func() { _ = os.Rename(parent+".real", parent) })
	must(t, os.Symlink(host, parent))
	t.Cleanup(func() { _ = os.Remove(parent) })
	if _, err := s.Restore(ctx, "ses_a", c.ID, ws); err == nil {
		t.Fatal("a restore through a link above the workspace was made")
	}
	if got := tree(t, host); len(got) != 3 || got["shadow"] != "f -rw------- host secret" || got["child/x"] != "f -rw------- host x" {
		t.Fatalf("the host directory changed: %v", got)
	}
	if n := countBlobs(t, s); n != 1 {
		t.Fatalf("%d blobs: the host directory was read", n)
	}
}

// TestGitignoreBombsAreBounded: a .gitignore of more than
// maxIgnorePatterns patterns, or with a line over maxIgnoreLineBytes, is
// not used (compiled, each of its patterns would cost kilobytes and be
// matched against every path below it); once a walk has done
// Options.ignoreWork of matching it matches no more paths. What they
// would have ignored is recorded.
func TestGitignoreBombsAreBounded(t *testing.T) {
	ws := t.TempDir()
	var many strings.Builder
	for i := range maxIgnorePatterns {
		fmt.Fprintf(&many, "x%d\n", i)
	}
	write(t, ws, "many/.gitignore", many.String()+"*.o\n", 0o644)
	write(t, ws, "many/f.o", "o", 0o644)
	write(t, ws, "long/.gitignore", "*.o\n"+strings.Repeat("y", maxIgnoreLineBytes+1)+"\n", 0o644)
	write(t, ws, "long/f.o", "o", 0o644)
	write(t, ws, "fine/.gitignore", many.String()[:len(many.String())-len("x999\n")]+"*.o\n", 0o644)
	write(t, ws, "fine/f.o", "o", 0o644)
	s := newStore(t, Options{})
	c, err := s.Create(context.Background(), "ses_a", "t1", ws)
	must(t, err)
	m, err := s.readManifest("ses_a", c.ID)
	must(t, err)
	if m.byPath["many/f.o"] == nil || m.byPath["long/f.o"] == nil || m.byPath["fine/f.o"] != nil {
		t.Fatalf("many/f.o %v, long/f.o %v (want recorded), fine/f.o %v (want ignored)",
			m.byPath["many/f.o"] != nil, m.byPath["long/f.o"] != nil, m.byPath["fine/f.o"] != nil)
	}

	// The matching budget: spent after a few paths, the rest is recorded.
	ws = t.TempDir()
	write(t, ws, ".gitignore", "*.o\n", 0o644)
	for i := range 20 {
		write(t, ws, fmt.Sprintf("f%02d.o", i), "o", 0o644)
	}
	s = newStore(t, Options{ignoreWork: 50})
	c, err = s.Create(context.Background(), "ses_b", "t1", ws)
	must(t, err)
	ignored := 0
	for _, sk := range c.Skipped {
		if sk.Reason == SkipGitignore {
			ignored++
		}
	}
	if ignored == 0 || ignored >= 20 || c.Files != 21-ignored {
		t.Fatalf("%d ignored, %d files", ignored, c.Files)
	}
}
