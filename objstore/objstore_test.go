package objstore

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/snapshot"
)

// openTest opens a client of the test S3 server under a prefix of the
// test's own.
func openTest(t testing.TB) *Client {
	t.Helper()
	s3 := testenv.S3Server(t)
	c, err := Open(Config{URL: s3.URL, Environ: s3.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureBucket(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	return c
}

// writeTree makes files under dir: path → content ("->T" makes a
// symlink to T, "/" a directory).
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch c := files[p]; {
		case c == "/":
			err = os.Mkdir(full, 0o750)
		case strings.HasPrefix(c, "->"):
			err = os.Symlink(c[2:], full)
		default:
			err = os.WriteFile(full, []byte(c), 0o640)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// treeOf describes the tree under dir, path → kind, mode and content or
// target.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		default:
			b, _ := os.ReadFile(p)
			out[rel] = "file " + fi.Mode().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// countObjects counts the objects under prefix.
func countObjects(t *testing.T, c *Client, prefix string) int {
	t.Helper()
	n := 0
	if err := c.List(testenv.Context(t), prefix, func(string, int64) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// syncOnce writes the target of session id with a Syncer and an
// Uploader of its own and waits until it is recorded; it returns the
// Uploader.
func syncOnce(t *testing.T, c *Client, id string, target Target) *Uploader {
	t.Helper()
	u := NewUploader(c, t.TempDir())
	syncWith(t, u, id, target)
	return u
}

// syncWith writes the target of session id with a Syncer of its own
// through u and waits until it is recorded.
func syncWith(t *testing.T, u *Uploader, id string, target Target) {
	t.Helper()
	synced := make(chan int64, 1)
	s := NewSyncer(SyncerOptions{Uploader: u,
		Resolve: func(context.Context, string, string) (Target, error) { return target, nil },
		Synced:  func(_ context.Context, _ string, seq int64, _ time.Time) error { synced <- seq; return nil },
		Warn:    func(_, reason string) { t.Errorf("warning: %s", reason) },
	})
	defer s.Close(context.Background())
	s.TurnEnded(id, target.TurnID)
	select {
	case seq := <-synced:
		if seq != target.Seq {
			t.Fatalf("synced seq %d, want %d", seq, target.Seq)
		}
	case <-time.After(time.Minute):
		t.Fatal("never synced")
	}
}

// A session's workspace and HOME go to the store and come back whole in
// fresh directories (modes kept, set-id bits dropped), as state.json
// says; what a checkpoint leaves out (a link out, a FIFO, .git) is not
// followed or read; a second session with the same files, written by the
// same Uploader (a daemon's), puts nothing.
func TestSyncAndRestoreRoundTrip(t *testing.T) {
	c := openTest(t)
	ws, home := t.TempDir(), t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeTree(t, ws, map[string]string{"a.txt": "alpha", "src/b.go": "package b", "src/empty/": "/", "src/link": "->b.go",
		"out": "->" + secret, "etc": "->/etc", ".git/config": "[core]"})
	writeTree(t, home, map[string]string{".berth-demo/conv.jsonl": `{"turn":1}`, ".config/x": "same bytes", "up": "->../../.."})
	if err := os.Chmod(filepath.Join(ws, "src/b.go"), 0o755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	// A FIFO: read, it would hang the walk.
	if err := syscall.Mkfifo(filepath.Join(home, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, ws)
	u := syncOnce(t, c, "ses_a", Target{Seq: 42, TurnID: "turn_2", Workspace: ws, Home: home})
	if n := countObjects(t, c, "packs/"); u.Puts() != 2 || n != 2 {
		t.Errorf("objects put: %d, packs stored %d; want a pack of the workspace's small files and one of HOME's", u.Puts(), n)
	}

	ws2, home2 := t.TempDir(), t.TempDir()
	st, err := Restore(testenv.Context(t), c, "ses_a", ws2, home2, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Seq != 42 || st.TurnID != "turn_2" {
		t.Fatalf("state: seq %d turn %q", st.Seq, st.TurnID)
	}
	got := treeOf(t, ws2)
	want := map[string]string{"a.txt": before["a.txt"], "src": before["src"], "src/b.go": "file -rwxr-xr-x package b",
		"src/empty": before["src/empty"], "src/link": "link b.go"}
	if !equal(got, want) {
		t.Errorf("workspace restored:\n%v\nwant\n%v", got, want)
	}
	gotHome := treeOf(t, home2)
	for _, p := range []string{"fifo", "up"} {
		if _, ok := gotHome[p]; ok {
			t.Errorf("HOME restored %s (a FIFO or a link out)", p)
		}
	}
	if gotHome[".berth-demo/conv.jsonl"] != `file -rw-r----- {"turn":1}` || gotHome[".config/x"] != "file -rw-r----- same bytes" {
		t.Errorf("HOME restored: %v", gotHome)
	}

	// Restore refuses a directory that is not empty.
	if _, err := Restore(testenv.Context(t), c, "ses_a", ws2, "", RestoreOptions{}); berth.ErrorCode(err) != berth.EConflict {
		t.Errorf("restore into a full directory: %v, want conflict", err)
	}

	objects := countObjects(t, c, "blobs/") + countObjects(t, c, "packs/")
	ws3 := t.TempDir()
	writeTree(t, ws3, map[string]string{"copy.txt": "alpha", "x": "same bytes"})
	puts := u.Puts()
	syncWith(t, u, "ses_b", Target{Seq: 3, Workspace: ws3})
	if n := countObjects(t, c, "blobs/") + countObjects(t, c, "packs/"); n != objects || u.Puts() != puts {
		t.Errorf("the second session put %d objects (stored %d → %d), want none", u.Puts()-puts, objects, n)
	}
	ws4 := t.TempDir()
	if _, err := Restore(testenv.Context(t), c, "ses_b", ws4, "", RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := treeOf(t, ws4); got["copy.txt"] != "file -rw-r----- alpha" || got["x"] != "file -rw-r----- same bytes" {
		t.Errorf("the second session restored: %v", got)
	}
}

// A state.json that names a path out of the directory, a link out, or
// a blob whose content is not its hash is refused, and nothing is
// written outside the directory.
func TestRestoreRefusesDamagedState(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	const good = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // sha256("hello")
	if err := c.Put(ctx, BlobKey(good), strings.NewReader("HELLO"), 5); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	for name, files := range map[string][]File{
		"dotdot":   {{Path: "../escaped", Kind: checkpoint.KindFile, Mode: 0o644, Size: 5, SHA256: good}},
		"absolute": {{Path: "/tmp/escaped", Kind: checkpoint.KindFile, Mode: 0o644, Size: 5, SHA256: good}},
		"linkout":  {{Path: "l", Kind: checkpoint.KindSymlink, Mode: 0o777, Target: "../../escaped"}},
		"orphan":   {{Path: "nodir/f", Kind: checkpoint.KindFile, Mode: 0o644, Size: 5, SHA256: good}},
		"badblob":  {{Path: "f", Kind: checkpoint.KindFile, Mode: 0o644, Size: 5, SHA256: good}},
	} {
		if err := c.putJSON(ctx, StateKey("ses_"+name), State{V: StateVersion, SessionID: "ses_" + name, Workspace: &Tree{Files: files}}); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := Restore(ctx, c, "ses_"+name, dir, "", RestoreOptions{})
		if berth.ErrorCode(err) != berth.EInternal {
			t.Errorf("%s: %v, want internal", name, err)
		}
		if got := treeOf(t, dir); len(got) != 0 {
			t.Errorf("%s: left %v", name, got)
		}
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 5 {
		t.Errorf("something was written beside the directories: %v", ents)
	}
	if _, err := Restore(ctx, c, "ses_none", t.TempDir(), "", RestoreOptions{}); berth.ErrorCode(err) != berth.ENotFound {
		t.Errorf("no state: %v, want not_found", err)
	}
}

// With the store unreachable, TurnEnded returns at once, the session is
// warned once however often the write fails, and the state is written
// (synced_seq recorded) once the store is back.
func TestSyncerStoreDown(t *testing.T) {
	c, proxy := openBehindProxy(t)
	proxy.SetDown(true)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"f": "one"})
	var warns, attempts atomic.Int32
	var seq atomic.Int64
	seq.Store(5)
	synced := make(chan int64, 10)
	s := NewSyncer(SyncerOptions{Uploader: NewUploader(c, ""), MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Resolve: func(context.Context, string, string) (Target, error) {
			attempts.Add(1)
			return Target{Seq: seq.Load(), Workspace: ws}, nil
		},
		Synced: func(_ context.Context, _ string, n int64, _ time.Time) error {
			synced <- n
			return nil
		},
		Warn: func(id, reason string) {
			warns.Add(1)
			if id != "ses_x" || !strings.Contains(reason, "object store") {
				t.Errorf("warning %s: %q", id, reason)
			}
		},
	})
	defer s.Close(context.Background())
	start := time.Now()
	for range 100 {
		s.TurnEnded("ses_x", "turn_1")
	}
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Errorf("100 TurnEnded took %s with the store down", took)
	}
	// Several failed writes, each backed off.
	testenv.WaitFor(t, 30*time.Second, "failed writes", func() bool { return attempts.Load() > 5 })
	lag, last := s.Lag()
	if lag <= 0 || last == "" {
		t.Errorf("lag %s, last error %q with the store down", lag, last)
	}
	select {
	case n := <-synced:
		t.Fatalf("synced %d with the store down", n)
	default:
	}
	seq.Store(9)
	s.TurnEnded("ses_x", "turn_2")
	proxy.SetDown(false)
	// A write that read seq 5 before turn_2 ended may land first, once
	// the store is back; the latest turn's follows.
	for n := int64(0); n != 9; {
		select {
		case n = <-synced:
			if n != 5 && n != 9 {
				t.Fatalf("synced %d, want the latest turn's 9 (or 5 before it)", n)
			}
		case <-time.After(time.Minute):
			t.Fatal("the latest turn not synced once the store was back")
		}
	}
	if w := warns.Load(); w != 1 {
		t.Errorf("%d warnings for one failure streak, want 1", w)
	}
	// Recorded by the worker once Synced returned.
	testenv.WaitFor(t, 10*time.Second, "no lag once synced", func() bool { lag, _ := s.Lag(); return lag == 0 })
	if _, err := ReadState(testenv.Context(t), c, "ses_x"); err != nil {
		t.Errorf("state after the store came back: %v", err)
	}
}

// openBehindProxy opens a client of the test S3 server through a proxy
// the test can cut (SetDown).
func openBehindProxy(t *testing.T) (*Client, *testenv.SwitchProxy) {
	t.Helper()
	s3 := testenv.S3Server(t)
	loc, err := ParseURL(s3.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewSwitchProxy(t, loc.Endpoint)
	c, err := Open(Config{URL: strings.Replace(s3.URL, loc.Endpoint, proxy.Addr(), 1), Environ: s3.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	return c, proxy
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The session's local checkpoints and snapshots go to the store with its
// state, each once: a checkpoint's manifest and its blobs (shared with
// the workspace's), a snapshot's archive and metadata; state.json names
// the checkpoints.
func TestSyncCheckpointsAndSnapshots(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a.txt": "alpha", "d/b.txt": "beta"})
	cs := checkpoint.New(t.TempDir(), checkpoint.Options{})
	ck, err := cs.Create(ctx, "ses_c", "turn_1", ws)
	if err != nil {
		t.Fatal(err)
	}
	ss := snapshot.New(t.TempDir())
	snap, err := ss.Create(ctx, "ses_c", ws)
	if err != nil {
		t.Fatal(err)
	}
	u := NewUploader(c, "")
	synced := make(chan int64, 4)
	s := NewSyncer(SyncerOptions{Uploader: u, Checkpoints: cs, Snapshots: ss,
		Resolve: func(context.Context, string, string) (Target, error) { return Target{Seq: 4, Workspace: ws}, nil },
		Synced:  func(_ context.Context, _ string, seq int64, _ time.Time) error { synced <- seq; return nil },
		Warn:    func(_, reason string) { t.Errorf("warning: %s", reason) },
	})
	defer s.Close(context.Background())
	for range 2 {
		s.TurnEnded("ses_c", "turn_1")
		select {
		case <-synced:
		case <-time.After(time.Minute):
			t.Fatal("never synced")
		}
	}
	var stored StoredCheckpoint
	if err := c.getJSON(ctx, CheckpointKey("ses_c", ck.ID), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Checkpoint.ID != ck.ID || len(stored.Files) != 3 {
		t.Errorf("stored checkpoint: %+v", stored)
	}
	// The snapshot comes after the state.
	for _, key := range []string{SnapshotKey("ses_c", snap.ID+".tar.zst"), SnapshotKey("ses_c", snap.ID+".json")} {
		testenv.WaitFor(t, 30*time.Second, key, func() bool {
			_, ok, err := c.Stat(ctx, key)
			return err == nil && ok
		})
	}
	st, err := ReadState(ctx, c, "ses_c")
	if err != nil || len(st.Checkpoints) != 1 || st.Checkpoints[0] != ck.ID {
		t.Fatalf("state: %+v, %v", st, err)
	}
	// The workspace's two small files in a pack (a restore reads them in
	// one GET), which the checkpoint names too rather than blobs of its
	// own: put once though the session was written twice.
	if blobs, packs := countObjects(t, c, "blobs/"), countObjects(t, c, "packs/"); blobs != 0 || packs != 1 || u.Puts() != 1 {
		t.Errorf("%d blobs and %d packs stored, %d objects put; want 0, 1 and 1", blobs, packs, u.Puts())
	}
}

// The Syncer remembers at most maxKept sessions once they are written (the
// walks it keeps of each would otherwise grow with every session a
// daemon ever ran).
func TestSyncerForgetsPastMaxKept(t *testing.T) {
	c := openTest(t)
	var synced atomic.Int64
	s := NewSyncer(SyncerOptions{Uploader: NewUploader(c, ""), Workers: 4,
		Resolve: func(context.Context, string, string) (Target, error) { return Target{Seq: 1}, nil },
		Synced:  func(context.Context, string, int64, time.Time) error { synced.Add(1); return nil },
	})
	defer s.Close(context.Background())
	const n = maxKept + 20
	for i := range n {
		s.TurnEnded(fmt.Sprintf("ses_%04d", i), "turn_1")
	}
	testenv.WaitFor(t, time.Minute, "every session written", func() bool { return synced.Load() == n })
	s.mu.Lock()
	kept := len(s.sessions)
	s.mu.Unlock()
	if kept != maxKept {
		t.Errorf("%d sessions kept, want %d", kept, maxKept)
	}
}

// A root daemon restores for its sandboxes' user: with Chown every path
// restored (links included) is given to UID:GID.
func TestRestoreChown(t *testing.T) {
	testenv.NeedRoot(t, "chown to another user needs root")
	c := openTest(t)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"d/f": "x", "d/l": "->f"})
	syncOnce(t, c, "ses_own", Target{Seq: 1, Workspace: ws})
	dst := t.TempDir()
	if _, err := Restore(testenv.Context(t), c, "ses_own", dst, "", RestoreOptions{Chown: true, UID: 54321, GID: 54322}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d", "d/f", "d/l"} {
		fi, err := os.Lstat(filepath.Join(dst, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 54321 || st.Gid != 54322 {
			t.Errorf("%s belongs to %d:%d", p, st.Uid, st.Gid)
		}
	}
}

// Close writes the sessions whose turns ended last before it stops (a
// daemon's shutdown), within its context.
func TestSyncerCloseWritesWhatWaits(t *testing.T) {
	c := openTest(t)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"f": "last turn's"})
	var synced atomic.Int64
	s := NewSyncer(SyncerOptions{Uploader: NewUploader(c, ""),
		Resolve: func(context.Context, string, string) (Target, error) { return Target{Seq: 3, Workspace: ws}, nil },
		Synced:  func(context.Context, string, int64, time.Time) error { synced.Add(1); return nil },
	})
	for i := range 5 {
		s.TurnEnded(fmt.Sprintf("ses_close%d", i), "turn_1")
	}
	s.Close(testenv.Context(t))
	if n := synced.Load(); n != 5 {
		t.Errorf("%d of 5 sessions written by Close", n)
	}
	s.TurnEnded("ses_after", "turn_1")
	s.Close(testenv.Context(t))
	if n := synced.Load(); n != 5 {
		t.Errorf("a turn ended after Close was written")
	}
}

// A session Resolve no longer finds (deleted) is dropped: not retried,
// not warned about.
func TestSyncerDropsGoneSession(t *testing.T) {
	c := openTest(t)
	s := NewSyncer(SyncerOptions{Uploader: NewUploader(c, ""), MinBackoff: time.Millisecond,
		Resolve: func(context.Context, string, string) (Target, error) {
			return Target{}, berth.Errorf(berth.ENotFound, "session not found")
		},
		Warn: func(_, reason string) { t.Errorf("warning for a deleted session: %s", reason) },
	})
	defer s.Close(context.Background())
	s.TurnEnded("ses_gone", "turn_1")
	testenv.WaitFor(t, 30*time.Second, "the session dropped", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.sessions) == 0
	})
	if lag, last := s.Lag(); lag != 0 || last != "" {
		t.Errorf("lag %s, last error %q", lag, last)
	}
}

// What a move needs comes first: the state (and synced_seq) is written
// before the checkpoints the store lacks, whose first write is one PUT a
// file; then the state again, naming them.
func TestStateIsWrittenBeforeTheCheckpoints(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a.txt": "alpha"})
	cs := checkpoint.New(t.TempDir(), checkpoint.Options{})
	ck, err := cs.Create(ctx, "ses_o", "turn_1", ws)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		ckpt   bool
		naming []string
	}
	synced := make(chan seen, 4)
	// The checkpoint the callback looks for: the newest.
	var mu sync.Mutex
	s := NewSyncer(SyncerOptions{Uploader: NewUploader(c, ""), Checkpoints: cs,
		Resolve: func(context.Context, string, string) (Target, error) { return Target{Seq: 2, Workspace: ws}, nil },
		Synced: func(ctx context.Context, id string, _ int64, _ time.Time) error {
			mu.Lock()
			newest := ck.ID
			mu.Unlock()
			_, ok, err := c.Stat(ctx, CheckpointKey(id, newest))
			st, serr := ReadState(ctx, c, id)
			if err != nil || serr != nil {
				t.Errorf("stat: %v, state: %v", err, serr)
				return nil
			}
			synced <- seen{ok, st.Checkpoints}
			return nil
		},
		Warn: func(_, reason string) { t.Errorf("warning: %s", reason) },
	})
	defer s.Close(context.Background())
	s.TurnEnded("ses_o", "turn_1")
	var got []seen
	for range 2 {
		select {
		case sn := <-synced:
			got = append(got, sn)
		case <-time.After(time.Minute):
			t.Fatalf("synced %d times", len(got))
		}
	}
	if got[0].ckpt || len(got[0].naming) != 0 || !got[1].ckpt || !slices.Equal(got[1].naming, []string{ck.ID}) {
		t.Fatalf("as synced_seq was recorded: %+v, want the checkpoint absent and unnamed, then stored and named", got)
	}
	// The next turn's checkpoint (few new blobs) goes first: the state is
	// written once, naming it.
	writeTree(t, ws, map[string]string{"b.txt": "beta"})
	ck2, err := cs.Create(ctx, "ses_o", "turn_2", ws)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ck = ck2
	mu.Unlock()
	s.TurnEnded("ses_o", "turn_2")
	select {
	case sn := <-synced:
		if !sn.ckpt || len(sn.naming) != 2 || sn.naming[1] != ck2.ID {
			t.Fatalf("the next turn's state: %+v, want its checkpoint stored and named", sn)
		}
	case <-time.After(time.Minute):
		t.Fatal("the next turn never synced")
	}
	select {
	case sn := <-synced:
		t.Fatalf("the state written twice for the next turn: %+v", sn)
	case <-time.After(300 * time.Millisecond):
	}
}

// Turns that end within the Syncer's delay of each other are written
// together: a session running turn after turn is not walked and written
// after each (on two cores, that work slowed its next turns).
func TestSyncerWritesTurnsInQuickSuccessionOnce(t *testing.T) {
	c := openTest(t)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a.txt": "alpha"})
	var mu sync.Mutex
	var seqs []int64
	seq := int64(0)
	s := NewSyncer(SyncerOptions{Uploader: NewUploader(c, ""), Delay: 300 * time.Millisecond,
		Resolve: func(context.Context, string, string) (Target, error) {
			mu.Lock()
			defer mu.Unlock()
			return Target{Seq: seq, Workspace: ws}, nil
		},
		Synced: func(_ context.Context, _ string, seq int64, _ time.Time) error {
			mu.Lock()
			seqs = append(seqs, seq)
			mu.Unlock()
			return nil
		},
		Warn: func(_, reason string) { t.Errorf("warning: %s", reason) },
	})
	defer s.Close(context.Background())
	for range 10 {
		mu.Lock()
		seq++
		mu.Unlock()
		s.TurnEnded("ses_q", "turn")
		time.Sleep(10 * time.Millisecond)
	}
	testenv.WaitFor(t, 30*time.Second, "the last turn written", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seqs) > 0 && seqs[len(seqs)-1] == 10
	})
	mu.Lock()
	defer mu.Unlock()
	if len(seqs) != 1 {
		t.Fatalf("ten turns 10 ms apart written %d times (%v), want once", len(seqs), seqs)
	}
}
