package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// source is a BlobSource reading another store's blobs, counting the
// blobs asked for.
type source struct {
	from  *Store
	mu    sync.Mutex
	asked []string
}

func (src *source) open(_ context.Context, hash string, _ int64) (io.ReadCloser, error) {
	src.mu.Lock()
	src.asked = append(src.asked, hash)
	src.mu.Unlock()
	return src.from.OpenBlob(hash)
}

// fetched returns how many blobs were asked for since the last call.
func (src *source) fetched() int {
	src.mu.Lock()
	defer src.mu.Unlock()
	n := len(src.asked)
	src.asked = nil
	return n
}

// export reads checkpoint id of sid from s as another node hands it on:
// its metadata and whole manifest.
func export(t *testing.T, s *Store, sid, id string) (*Checkpoint, []Entry) {
	t.Helper()
	meta, entries, err := s.Entries(sid, id)
	must(t, err)
	return meta, entries
}

// importedAs fails unless s lists, for sid, the checkpoints want (ids,
// turns and counts), oldest first.
func importedAs(t *testing.T, s *Store, sid string, want []*Checkpoint) {
	t.Helper()
	got, err := s.List(sid)
	must(t, err)
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = g.ID == w.ID && g.TurnID == w.TurnID && g.SessionID == w.SessionID && g.Files == w.Files &&
			g.Bytes == w.Bytes && g.CreatedAt.Equal(w.CreatedAt) && len(g.Skipped) == len(w.Skipped)
	}
	if !same {
		t.Fatalf("%s lists %+v, want %+v", sid, got, want)
	}
}

// TestImportRoundTrip: the checkpoints of a session taken by one store,
// imported into another (a node the session moved to, where an earlier
// stay left one) oldest first, are listed there as they were and each
// restores the exact tree; a blob the store has is not fetched again; an
// import again changes nothing; none keeps the other node's stat fields
// or owners; the accounting is the one a rescan builds; the session's
// next checkpoint follows the newest imported, not the earlier stay's.
func TestImportRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{})
	// The accounting is built before: each import counts in it.
	_, err := s.Sweep()
	must(t, err)
	// An earlier stay of the session on this node left a checkpoint.
	earlier := t.TempDir()
	write(t, earlier, "e.txt", "earlier stay", 0o644)
	local, err := s.Create(ctx, "ses_m", "turn_0", earlier)
	must(t, err)

	old, ws := newStore(t, Options{}), t.TempDir()
	write(t, ws, "a.txt", "alpha", 0o644)
	write(t, ws, "bin/run.sh", "#!/bin/sh\n", 0o755)
	write(t, ws, "src/deep/x.go", "package x", 0o600)
	write(t, ws, "same1", "twin", 0o644)
	write(t, ws, "same2", "twin", 0o640)
	must(t, os.Symlink("src/deep/x.go", filepath.Join(ws, "link")))
	must(t, os.Mkdir(filepath.Join(ws, "empty"), 0o750))
	first, err := old.Create(ctx, "ses_m", "turn_1", ws)
	must(t, err)
	wantFirst := tree(t, ws)
	write(t, ws, "a.txt", "alpha two", 0o600)
	must(t, os.Remove(filepath.Join(ws, "bin/run.sh")))
	write(t, ws, "new/file", "new", 0o644)
	second, err := old.Create(ctx, "ses_m", "turn_2", ws)
	must(t, err)
	wantSecond := tree(t, ws)

	src := &source{from: old}
	for _, c := range []*Checkpoint{first, second} {
		meta, entries := export(t, old, "ses_m", c.ID)
		must(t, s.Import(ctx, "ses_m", meta, entries, src.open))
	}
	// Four distinct contents in the first (two files share one), two new
	// in the second.
	if n := src.fetched(); n != 6 {
		t.Fatalf("%d blobs fetched, want 6", n)
	}
	importedAs(t, s, "ses_m", []*Checkpoint{local, first, second})
	restoresAs(t, s, "ses_m", first.ID, "the first imported", wantFirst)
	restoresAs(t, s, "ses_m", second.ID, "the second imported", wantSecond)
	sameAsRescan(t, s)

	// Again: nothing fetched, nothing changed.
	metaFile := s.metaPath("ses_m", first.ID)
	before, err := os.Stat(metaFile)
	must(t, err)
	meta, entries := export(t, old, "ses_m", first.ID)
	must(t, s.Import(ctx, "ses_m", meta, entries, src.open))
	after, err := os.Stat(metaFile)
	must(t, err)
	if n := src.fetched(); n != 0 || !os.SameFile(before, after) {
		t.Fatalf("an import again fetched %d blobs, rewrote the metadata: %v", n, !os.SameFile(before, after))
	}
	importedAs(t, s, "ses_m", []*Checkpoint{local, first, second})

	_, got, err := s.Entries("ses_m", second.ID)
	must(t, err)
	for _, e := range got {
		if e.MTime != 0 || e.CTime != 0 || e.Ino != 0 || e.Dev != 0 || e.UID != OwnerUnknown || e.GID != OwnerUnknown {
			t.Fatalf("imported entry keeps the other node's stat fields or owner: %+v", e)
		}
	}

	// The next checkpoint here reads every file (nothing of the other
	// node's stat is trusted) and comes after the imported ones.
	reads := s.reads.Load()
	write(t, ws, "a.txt", "alpha three", 0o644)
	third, err := s.Create(ctx, "ses_m", "turn_3", ws)
	must(t, err)
	if n := s.reads.Load() - reads; n != int64(third.Files) {
		t.Fatalf("the checkpoint after the imported read %d of %d files", n, third.Files)
	}
	importedAs(t, s, "ses_m", []*Checkpoint{local, first, second, third})
	restoresAs(t, s, "ses_m", third.ID, "the checkpoint after the imported", tree(t, ws))
	sameAsRescan(t, s)
}

// TestImportOfAnOlderCheckpoint: a checkpoint older than the session's
// newest here is listed in its place; the accounting, dropped, is built
// again as a rescan builds it.
func TestImportOfAnOlderCheckpoint(t *testing.T) {
	ctx := context.Background()
	old, ws := newStore(t, Options{}), t.TempDir()
	writeRandom(t, ws, "a", 5000)
	first, err := old.Create(ctx, "ses_o", "turn_1", ws)
	must(t, err)
	writeRandom(t, ws, "b", 5000)
	second, err := old.Create(ctx, "ses_o", "turn_2", ws)
	must(t, err)
	s := newStore(t, Options{})
	_, err = s.Sweep()
	must(t, err)
	src := &source{from: old}
	for _, c := range []*Checkpoint{second, first} {
		meta, entries := export(t, old, "ses_o", c.ID)
		must(t, s.Import(ctx, "ses_o", meta, entries, src.open))
	}
	importedAs(t, s, "ses_o", []*Checkpoint{first, second})
	must(t, s.ensureIndex())
	sameAsRescan(t, s)
}

// TestImportCountsInItsTree: an imported checkpoint of a child counts in
// its root's tree as one taken here would: past max_tree_bytes, Prune of
// the tree removes the oldest, imported, and its blobs.
func TestImportCountsInItsTree(t *testing.T) {
	ctx := context.Background()
	old, ws := newStore(t, Options{}), t.TempDir()
	var made []*Checkpoint
	for i := range 3 {
		writeRandom(t, ws, "f", 40<<10)
		c, err := old.CreateIn(ctx, "ses_root", "ses_kid", "turn_"+string(rune('1'+i)), ws)
		must(t, err)
		made = append(made, c)
	}
	s := newStore(t, Options{MaxTreeBytes: 100 << 10})
	_, err := s.Sweep()
	must(t, err)
	src := &source{from: old}
	for _, c := range made {
		meta, entries := export(t, old, "ses_kid", c.ID)
		must(t, s.ImportIn(ctx, "ses_root", "ses_kid", meta, entries, src.open))
	}
	if tr := s.recordedTree("ses_kid"); tr != "ses_root" {
		t.Fatalf("the imported session counts in tree %q", tr)
	}
	ps := pruneChecked(t, s, "ses_root", "ses_kid")
	if len(ps) != 1 || ps[0].CheckpointID != made[0].ID || ps[0].SessionID != "ses_kid" || ps[0].RemovedBytes < 40<<10 {
		t.Fatalf("pruned %+v, want the oldest imported", ps)
	}
	importedAs(t, s, "ses_kid", made[1:])
	if onDisk, want := diskBlobs(t, s), named(t, s, "ses_kid"); len(onDisk) != len(want) {
		t.Fatalf("%d blobs on disk, %d named", len(onDisk), len(want))
	}
	sameAsRescan(t, s)
}

// TestImportRefusesDamage: the store a checkpoint comes from is not
// trusted. A blob that is not its hash's content (or not its size), a
// path out of the workspace or under a file, a link that leads out, a
// kind or hash that is not one, a metadata of another session: each is
// refused EInternal, and nothing is listed, no blob kept, no temporary
// file left. A source that fails passes its error on, and nothing is
// listed either.
func TestImportRefusesDamage(t *testing.T) {
	ctx := context.Background()
	old, ws := newStore(t, Options{}), t.TempDir()
	write(t, ws, "d/f", "content", 0o644)
	c, err := old.Create(ctx, "ses_d", "turn_1", ws)
	must(t, err)
	meta, good := export(t, old, "ses_d", c.ID)
	fileHash := ""
	for _, e := range good {
		if e.Kind == KindFile {
			fileHash = e.Hash
		}
	}
	sum := sha256.Sum256([]byte("other"))
	otherHash := hex.EncodeToString(sum[:])
	with := func(extra ...Entry) []Entry { return append(slices.Clone(good), extra...) }
	src := &source{from: old}
	lying := func(context.Context, string, int64) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("not the content")), nil
	}
	short := func(context.Context, string, int64) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("con")), nil
	}
	for _, tc := range []struct {
		name    string
		meta    *Checkpoint
		entries []Entry
		blob    BlobSource
		code    string
	}{
		{"a blob not its hash's", meta, good, lying, berth.EInternal},
		{"a blob cut short", meta, good, short, berth.EInternal},
		{"a path with ..", meta, with(Entry{Path: "../escape", Kind: KindDir, Mode: 0o755}), src.open, berth.EInternal},
		{"an absolute path", meta, with(Entry{Path: "/etc/x", Kind: KindDir, Mode: 0o755}), src.open, berth.EInternal},
		{"a path not clean", meta, with(Entry{Path: "d/./g", Kind: KindDir, Mode: 0o755}), src.open, berth.EInternal},
		{"a path twice", meta, with(Entry{Path: "d", Kind: KindDir, Mode: 0o700}), src.open, berth.EInternal},
		{"a path under a file", meta, with(Entry{Path: "d/f/g", Kind: KindFile, Hash: fileHash, Size: 7}), src.open, berth.EInternal},
		{"a path with no directory", meta, with(Entry{Path: "nodir/g", Kind: KindFile, Hash: fileHash, Size: 7}), src.open, berth.EInternal},
		{"a link out", meta, with(Entry{Path: "d/l", Kind: KindSymlink, Target: "../../etc/passwd"}), src.open, berth.EInternal},
		{"an absolute link", meta, with(Entry{Path: "d/l", Kind: KindSymlink, Target: "/etc/passwd"}), src.open, berth.EInternal},
		{"a bad hash", meta, with(Entry{Path: "h", Kind: KindFile, Hash: "../../../x"}), src.open, berth.EInternal},
		{"one blob with two sizes", meta, with(Entry{Path: "g", Kind: KindFile, Hash: fileHash, Size: 8}), src.open, berth.EInternal},
		{"an unknown kind", meta, with(Entry{Path: "p", Kind: "fifo"}), src.open, berth.EInternal},
		{"a removal mark", meta, with(Entry{Path: "p", Kind: kindRemoved}), src.open, berth.EInternal},
		{"another session's", &Checkpoint{Checkpoint: meta.Checkpoint, SessionID: "ses_other"}, good, src.open, berth.EInternal},
		{"a bad id", &Checkpoint{Checkpoint: berth.Checkpoint{ID: "ckpt_../../x"}, SessionID: "ses_d"}, good, src.open, berth.EInternal},
		{"a source that fails", meta, with(Entry{Path: "o", Kind: KindFile, Hash: otherHash, Size: 5}), src.open, berth.ENotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, Options{})
			err := s.Import(ctx, "ses_d", tc.meta, tc.entries, tc.blob)
			if !berth.IsCode(err, tc.code) {
				t.Fatalf("import: %v, want %s", err, tc.code)
			}
			if l, err := s.List("ses_d"); err != nil || len(l) != 0 {
				t.Fatalf("listed after a refused import: %v %v", l, err)
			}
			if b := diskBlobs(t, s); len(b) != 0 {
				t.Fatalf("blobs left after a refused import: %v", b)
			}
			ents, _ := os.ReadDir(s.sessionDir("ses_d"))
			for _, e := range ents {
				if e.Name() != treeFile {
					t.Fatalf("%s left in the session's directory", e.Name())
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(ws, "..", "escape")); err == nil {
		t.Fatal("an import wrote outside the store")
	}
	if err := newStore(t, Options{}).Import(ctx, "../ses", meta, good, src.open); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("a bad session id: %v", err)
	}
}

// TestRestoreOfImportGivesPathsToTheWorkspaceOwner: as root, a restore
// gives an imported path, whose owner on the other node means nothing
// here, to the workspace's owner (the sandbox's user), not to root.
func TestRestoreOfImportGivesPathsToTheWorkspaceOwner(t *testing.T) {
	testenv.NeedRoot(t, "a restore gives paths to their owners as root only")
	ctx := context.Background()
	old, ws := newStore(t, Options{}), t.TempDir()
	write(t, ws, "d/f", "content", 0o644)
	must(t, os.Symlink("f", filepath.Join(ws, "d", "l")))
	c, err := old.Create(ctx, "ses_u", "turn_1", ws)
	must(t, err)
	s := newStore(t, Options{})
	meta, entries := export(t, old, "ses_u", c.ID)
	must(t, s.Import(ctx, "ses_u", meta, entries, (&source{from: old}).open))
	dst := t.TempDir()
	must(t, os.Chown(dst, 54321, 54322))
	_, err = s.Restore(ctx, "ses_u", c.ID, dst)
	must(t, err)
	for _, p := range []string{"d", "d/f", "d/l"} {
		fi, err := os.Lstat(filepath.Join(dst, p))
		must(t, err)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 54321 || st.Gid != 54322 {
			t.Errorf("%s restored as %d:%d, want the workspace's 54321:54322", p, st.Uid, st.Gid)
		}
	}
}

// TestImportFetchesWithoutHoldingOthersUp: while an import waits for a
// slow source, other sessions' checkpoints, a sweep and a delete go on
// (blobs are fetched before removals are held off), and the sweep leaves
// the import's fetched blobs alone, removing only what a crash left. A
// blob the store had when the import began and lost meanwhile (its only
// session deleted) is fetched too: the imported checkpoint restores.
func TestImportFetchesWithoutHoldingOthersUp(t *testing.T) {
	ctx := context.Background()
	old, ws := newStore(t, Options{}), t.TempDir()
	write(t, ws, "shared", "in both", 0o644)
	write(t, ws, "slow", "comes late", 0o644)
	c, err := old.Create(ctx, "ses_i", "turn_1", ws)
	must(t, err)
	wantTree := tree(t, ws)
	meta, entries := export(t, old, "ses_i", c.ID)

	s := newStore(t, Options{})
	other := t.TempDir()
	write(t, other, "shared", "in both", 0o644)
	_, err = s.Create(ctx, "ses_gone", "turn_1", other)
	must(t, err)
	crashed := filepath.Join(s.dir, incomingDir, tempPrefix+"crashed")
	must(t, os.MkdirAll(crashed, 0o700))
	write(t, crashed, "blob", "left by a crash", 0o600)

	src := &source{from: old}
	slowHash := ""
	for _, e := range entries {
		if e.Path == "slow" {
			slowHash = e.Hash
		}
	}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	// A failure before the release must not leave the import waiting.
	t.Cleanup(letGo)
	blob := func(ctx context.Context, hash string, size int64) (io.ReadCloser, error) {
		if hash == slowHash {
			close(started)
			<-release
		}
		return src.open(ctx, hash, size)
	}
	done := make(chan error, 1)
	go func() { done <- s.Import(ctx, "ses_i", meta, entries, blob) }()
	<-started
	third := t.TempDir()
	write(t, third, "more", "another session", 0o644)
	others := make(chan error, 1)
	go func() {
		if _, err := s.Create(ctx, "ses_other", "turn_1", third); err != nil {
			others <- err
			return
		}
		if _, err := s.Sweep(); err != nil {
			others <- err
			return
		}
		// The only session naming the shared blob: it goes with it.
		others <- s.Delete("ses_gone")
	}()
	testenv.WaitFor(t, 30*time.Second, "a checkpoint, a sweep and a delete while the import waits", func() bool {
		select {
		case err := <-others:
			must(t, err)
			return true
		default:
			return false
		}
	})
	if _, err := os.Stat(crashed); err == nil {
		t.Fatal("the sweep left what a crash left in incoming/")
	}
	sharedHash := ""
	for _, e := range entries {
		if e.Path == "shared" {
			sharedHash = e.Hash
		}
	}
	if s.hasBlob(sharedHash) {
		t.Fatal("the deleted session's blob is still there")
	}
	if ents, _ := os.ReadDir(filepath.Join(s.dir, incomingDir)); len(ents) != 1 {
		t.Fatalf("the sweep removed the import's fetch in flight: %d left", len(ents))
	}
	letGo()
	must(t, <-done)
	restoresAs(t, s, "ses_i", c.ID, "the import", wantTree)
	if ents, _ := os.ReadDir(filepath.Join(s.dir, incomingDir)); len(ents) != 0 {
		t.Fatalf("%d fetches left in incoming/", len(ents))
	}
	sameAsRescan(t, s)
}
