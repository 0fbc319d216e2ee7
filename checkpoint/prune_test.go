package checkpoint

import (
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// writeRandom writes n random bytes to dir/rel.
func writeRandom(t *testing.T, dir, rel string, n int) {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, rel), b, 0o644))
}

// diskBlobs returns the blobs on disk by name, with their sizes.
func diskBlobs(t *testing.T, s *Store) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	_ = filepath.WalkDir(s.blobDir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			out[d.Name()] = fi.Size()
		}
		return nil
	})
	return out
}

// named returns the blobs the listed checkpoints of sessions name, read
// from disk, with their sizes.
func named(t *testing.T, s *Store, sessions ...string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, sid := range sessions {
		list, err := s.List(sid)
		must(t, err)
		for _, c := range list {
			m, err := s.readManifest(sid, c.ID)
			if err != nil {
				t.Fatalf("%s %s: %v", sid, c.ID, err)
			}
			for _, e := range m.entries {
				if e.Kind == KindFile {
					out[e.Hash] = e.Size
				}
			}
		}
	}
	return out
}

// sum adds up a set's sizes.
func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// ownFiles is the footprint of the manifests and metadata of the listed
// checkpoints of sessions.
func ownFiles(t *testing.T, s *Store, sessions ...string) int64 {
	t.Helper()
	var n int64
	for _, sid := range sessions {
		list, err := s.List(sid)
		must(t, err)
		for _, c := range list {
			for _, p := range []string{s.entriesPath(sid, c.ID), s.metaPath(sid, c.ID)} {
				fi, err := os.Stat(p)
				must(t, err)
				n += footprint(fi.Size())
			}
		}
	}
	return n
}

// diskTreeBytes is what the listed checkpoints of sessions take on disk,
// read from the disk: their distinct blobs' footprints and their files'.
func diskTreeBytes(t *testing.T, s *Store, sessions ...string) int64 {
	t.Helper()
	n := ownFiles(t, s, sessions...)
	for _, size := range named(t, s, sessions...) {
		n += footprint(size)
	}
	return n
}

// pruneChecked prunes tree, and fails unless what the prunes say they
// freed is what left the tree, read from disk, and the last says what it
// holds now.
func pruneChecked(t *testing.T, s *Store, tree string, sessions ...string) []Pruned {
	t.Helper()
	before := diskTreeBytes(t, s, sessions...)
	ps, err := s.Prune(tree, nil)
	must(t, err)
	after := diskTreeBytes(t, s, sessions...)
	var freed int64
	for _, p := range ps {
		freed += p.FreedBytes
	}
	if freed != before-after || len(ps) > 0 && ps[len(ps)-1].TreeBytes != after || treeBytes(s, tree) != after && after > 0 {
		t.Fatalf("%d bytes before, %d after, the prunes say %+v (accounting %d)", before, after, ps, treeBytes(s, tree))
	}
	return ps
}

// treeBytes is what the store's accounting says tree holds.
func treeBytes(s *Store, tree string) int64 {
	s.ixMu.Lock()
	defer s.ixMu.Unlock()
	if s.ix == nil || s.ix.trees[tree] == nil {
		return -1
	}
	return s.ix.trees[tree].bytes
}

// sameAsRescan fails unless the store's accounting, kept step by step, is
// the one a store opened afresh on the same directory builds from disk.
func sameAsRescan(t *testing.T, s *Store) {
	t.Helper()
	fresh := New(s.dir, s.opts)
	if _, err := fresh.Sweep(); err != nil {
		t.Fatal(err)
	}
	s.ixMu.Lock()
	defer s.ixMu.Unlock()
	a, b := s.ix, fresh.ix
	if a == nil {
		t.Fatal("the store has no accounting")
	}
	if len(a.trees) != len(b.trees) || len(a.sessions) != len(b.sessions) {
		t.Fatalf("%d trees, %d sessions; a rescan counts %d, %d", len(a.trees), len(a.sessions), len(b.trees), len(b.sessions))
	}
	for id, ta := range a.trees {
		tb := b.trees[id]
		if tb == nil || ta.bytes != tb.bytes || !maps.Equal(ta.refs, tb.refs) {
			t.Fatalf("tree %s: %d bytes and %d blobs; a rescan counts %+v", id, ta.bytes, len(ta.refs), tb != nil && ta.bytes == tb.bytes)
		}
	}
	for id, sa := range a.sessions {
		sb := b.sessions[id]
		if sb == nil || sa.tree.id != sb.tree.id || !slices.Equal(sa.ckpts, sb.ckpts) {
			t.Fatalf("session %s: %+v, a rescan counts %+v", id, sa.ckpts, sb)
		}
	}
	if !maps.Equal(a.blobs, b.blobs) {
		t.Fatalf("%d blobs named, a rescan counts %d", len(a.blobs), len(b.blobs))
	}
}

// sameContent fails unless dir holds what want says, naming the paths that
// differ.
func sameContent(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	var paths []string
	for _, d := range diff(want, got) {
		paths = append(paths, d[:strings.Index(d, ":")])
	}
	if len(paths) > 0 {
		t.Fatalf("%s differs at %v", what, paths)
	}
}

// restoresAs restores checkpoint id of session sid into a new directory
// and fails the test unless it holds want; what names the checkpoint.
func restoresAs(t *testing.T, s *Store, sid, id, what string, want map[string]string) {
	t.Helper()
	dst := t.TempDir()
	if _, err := s.Restore(context.Background(), sid, id, dst); err != nil {
		t.Fatalf("restore of %s: %v", what, err)
	}
	sameContent(t, what, want, tree(t, dst))
}

// TestTreeBytesCountEachBlobOncePerTree: a tree's bytes are the distinct
// blobs its sessions' checkpoints name — a parent and a child checkpointing
// one workspace count its files once — each at least a 4 KiB block, and
// the checkpoints' own files; a blob another tree names too counts for
// both; a delete takes a session's runs out without touching what another
// session still names.
func TestTreeBytesCountEachBlobOncePerTree(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{})
	ws, other := t.TempDir(), t.TempDir()
	writeRandom(t, ws, "a", 3000)
	writeRandom(t, ws, "d/b", 5000)
	for _, p := range []string{filepath.Join(ws, "same"), filepath.Join(other, "same"), filepath.Join(ws, "dup")} {
		must(t, os.WriteFile(p, []byte("shared by both trees"), 0o644))
	}
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	for _, sid := range []string{"ses_root", "ses_kid", "ses_root"} {
		if _, err := s.CreateIn(ctx, "ses_root", sid, "t", ws); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, "ses_other", "t", other); err != nil {
		t.Fatal(err)
	}
	// a: one block; d/b: two; same and dup: one blob, one block.
	blobs := int64(4 << 10)
	if got := treeBytes(s, "ses_root") - ownFiles(t, s, "ses_root", "ses_kid"); got != 16<<10 {
		t.Fatalf("the tree's blobs count %d bytes, want %d", got, 16<<10)
	}
	if got := treeBytes(s, "ses_other") - ownFiles(t, s, "ses_other"); got != blobs {
		t.Fatalf("the other tree's blobs count %d", got)
	}
	writeRandom(t, ws, "a", 7000)
	if _, err := s.CreateIn(ctx, "ses_root", "ses_kid", "t2", ws); err != nil {
		t.Fatal(err)
	}
	if got := treeBytes(s, "ses_root") - ownFiles(t, s, "ses_root", "ses_kid"); got != 24<<10 || treeBytes(s, "ses_root") != diskTreeBytes(t, s, "ses_root", "ses_kid") {
		t.Fatalf("the tree's blobs count %d after a change, want %d", got, 24<<10)
	}
	sameAsRescan(t, s)

	// The root's own blobs stay while the child's checkpoints name them.
	before := diskBlobs(t, s)
	must(t, s.Delete("ses_root"))
	if got := treeBytes(s, "ses_root"); got != diskTreeBytes(t, s, "ses_kid") {
		t.Fatalf("tree bytes %d after the root's delete", got)
	}
	if !maps.Equal(before, diskBlobs(t, s)) {
		t.Fatal("a delete removed blobs another session names")
	}
	sameAsRescan(t, s)
	must(t, s.Delete("ses_kid"))
	if got := treeBytes(s, "ses_root"); got != -1 {
		t.Fatalf("a tree of no session still counts %d bytes", got)
	}
	if got := diskBlobs(t, s); len(got) != 1 || sum(got) != int64(len("shared by both trees")) {
		t.Fatalf("blobs left: %v", got)
	}
	sameAsRescan(t, s)
}

// TestPruneKeepsATreeUnderItsCap is the attack's loop on the store: a
// parent and its child write five new random files into their workspace
// before every turn. Past the cap the tree's oldest checkpoints go, the
// parent's and the child's alike, oldest first, each answering not_found
// "pruned" from then on; every one left restores exactly; the disk holds
// no blob nothing names; another tree's checkpoints are untouched.
func TestPruneKeepsATreeUnderItsCap(t *testing.T) {
	ctx := context.Background()
	// The files that never change, and two rounds of new ones (with their
	// manifests), fit; three do not.
	const limit = 160 << 10
	s := newStore(t, Options{MaxTreeBytes: limit})
	ws, other := t.TempDir(), t.TempDir()
	writeRandom(t, other, "big", 80<<10)
	ob, err := s.Create(ctx, "ses_other", "t", other)
	must(t, err)
	otherBlobs := diskBlobs(t, s)
	// Files that never change: the manifests are deltas.
	for i := range 12 {
		write(t, ws, fmt.Sprintf("stable/%d", i), fmt.Sprint(i), 0o644)
	}
	wantOf := map[string]map[string]string{}
	sessionOf := map[string]string{}
	var made, pruned []string
	for round := range 12 {
		for i := range 5 {
			writeRandom(t, ws, fmt.Sprintf("f%d", i), 8<<10)
		}
		sid := []string{"ses_root", "ses_kid"}[round%2]
		c, err := s.CreateIn(ctx, "ses_root", sid, fmt.Sprintf("turn_%d", round), ws)
		must(t, err)
		wantOf[c.ID], sessionOf[c.ID] = tree(t, ws), sid
		made = append(made, c.ID)
		ps := pruneChecked(t, s, "ses_root", "ses_root", "ses_kid")
		for _, p := range ps {
			if p.SessionID != sessionOf[p.CheckpointID] || p.TurnID == "" || p.FreedBytes < 40<<10 || p.RemovedBytes != p.FreedBytes {
				t.Fatalf("round %d: pruned %+v", round, p)
			}
			pruned = append(pruned, p.CheckpointID)
		}
		if got := diskTreeBytes(t, s, "ses_root", "ses_kid"); got > limit {
			t.Fatalf("round %d: the tree takes %d bytes, cap %d", round, got, limit)
		}
	}
	// Oldest first, never the newest.
	if len(pruned) < 8 || !slices.Equal(pruned, made[:len(pruned)]) {
		t.Fatalf("pruned %v of %v", pruned, made)
	}
	for _, id := range pruned {
		_, err := s.Get(sessionOf[id], id)
		if !berth.IsCode(err, berth.ENotFound) || !strings.Contains(berth.ErrorMessage(err), "pruned") {
			t.Fatalf("get of pruned %s: %v", id, err)
		}
		_, err = s.Restore(ctx, sessionOf[id], id, t.TempDir())
		if !berth.IsCode(err, berth.ENotFound) || !strings.Contains(berth.ErrorMessage(err), "pruned") {
			t.Fatalf("restore of pruned %s: %v", id, err)
		}
	}
	if _, err := s.Get("ses_root", "ckpt_7zzzzzzzzzzzzzzzzzzzzzzzzz"); !berth.IsCode(err, berth.ENotFound) || strings.Contains(berth.ErrorMessage(err), "pruned") {
		t.Fatalf("a checkpoint never made: %v", err)
	}
	for _, id := range made[len(pruned):] {
		restoresAs(t, s, sessionOf[id], id, id, wantOf[id])
	}
	if l, _ := s.List("ses_other"); len(l) != 1 || l[0].ID != ob.ID {
		t.Fatalf("the other tree lists %v", l)
	}
	onDisk := diskBlobs(t, s)
	for h := range otherBlobs {
		if _, ok := onDisk[h]; !ok {
			t.Fatal("a blob of the other tree went")
		}
	}
	if want := named(t, s, "ses_root", "ses_kid", "ses_other"); !maps.Equal(onDisk, want) {
		t.Fatalf("%d blobs on disk, %d named", len(onDisk), len(want))
	}
	sameAsRescan(t, s)
}

// TestPruneKeepsTheNewest: a checkpoint alone over the cap stays, the
// only one of its tree: the next turn can still be rewound.
func TestPruneKeepsTheNewest(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{MaxTreeBytes: 10 << 10})
	ws := t.TempDir()
	writeRandom(t, ws, "small", 4<<10)
	first, err := s.Create(ctx, "ses_a", "t1", ws)
	must(t, err)
	if ps := pruneChecked(t, s, "ses_a", "ses_a"); len(ps) != 0 {
		t.Fatalf("the newest alone: %v", ps)
	}
	writeRandom(t, ws, "big", 50<<10)
	second, err := s.Create(ctx, "ses_a", "t2", ws)
	must(t, err)
	if ps := pruneChecked(t, s, "ses_a", "ses_a"); len(ps) != 1 || ps[0].CheckpointID != first.ID || ps[0].TreeBytes <= 54<<10 {
		t.Fatalf("pruned %+v", ps)
	}
	if ps := pruneChecked(t, s, "ses_a", "ses_a"); len(ps) != 0 {
		t.Fatalf("the newest alone: %v", ps)
	}
	if l, _ := s.List("ses_a"); len(l) != 1 || l[0].ID != second.ID {
		t.Fatalf("left %v", l)
	}
	restoresAs(t, s, "ses_a", second.ID, "the newest", tree(t, ws))
	sameAsRescan(t, s)
}

// TestPruneKeepsPinnedCheckpoints: the checkpoint a turn still in flight
// can be rewound to (pinned) stays, with its session's newer ones, however
// much a child of the tree writes meanwhile; the child's go.
func TestPruneKeepsPinnedCheckpoints(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{MaxTreeBytes: 60 << 10})
	ws := t.TempDir()
	writeRandom(t, ws, "mine", 8<<10)
	before, err := s.CreateIn(ctx, "ses_root", "ses_root", "t_root", ws)
	must(t, err)
	pinned := map[string]bool{before.ID: true}
	for round := range 6 {
		writeRandom(t, ws, fmt.Sprintf("f%d", round), 20<<10)
		_, err := s.CreateIn(ctx, "ses_root", "ses_kid", fmt.Sprintf("t_kid%d", round), ws)
		must(t, err)
		ps, err := s.Prune("ses_root", pinned)
		must(t, err)
		for _, p := range ps {
			if p.CheckpointID == before.ID {
				t.Fatalf("round %d: the pinned checkpoint was pruned", round)
			}
		}
	}
	if _, err := s.Get("ses_root", before.ID); err != nil {
		t.Fatalf("the pinned checkpoint: %v", err)
	}
	if l, _ := s.List("ses_kid"); len(l) >= 6 {
		t.Fatalf("the child's checkpoints were not pruned: %d", len(l))
	}
	// Once nothing pins it, it goes like any other.
	ps, err := s.Prune("ses_root", nil)
	must(t, err)
	if len(ps) == 0 || ps[0].CheckpointID != before.ID {
		t.Fatalf("unpinned, pruned %+v", ps)
	}
	sameAsRescan(t, s)
}

// deltaOnFirst makes a store whose session ses_a has two checkpoints of
// a workspace of 20 files, the second a delta on the first (one file
// changed), and returns them and the workspace.
func deltaOnFirst(t *testing.T) (s *Store, ws string, first, second *Checkpoint) {
	t.Helper()
	ws = t.TempDir()
	for i := range 20 {
		writeRandom(t, ws, fmt.Sprintf("f%02d", i), 1000)
	}
	s = New(filepath.Join(t.TempDir(), "checkpoints"), Options{})
	first, err := s.Create(context.Background(), "ses_a", "t1", ws)
	must(t, err)
	writeRandom(t, ws, "f00", 1000)
	second, err = s.Create(context.Background(), "ses_a", "t2", ws)
	must(t, err)
	return s, ws, first, second
}

// TestPruneRewritesTheDeltaOnIt: the checkpoint after a pruned one, a
// delta on it, is written whole first and restores as before, as does a
// delta made on it later; only the blob no checkpoint goes on naming is
// freed.
func TestPruneRewritesTheDeltaOnIt(t *testing.T) {
	ctx := context.Background()
	s, ws, first, second := deltaOnFirst(t)
	dir := s.dir
	want := tree(t, ws)
	if h, _, err := s.readEntries(s.entriesPath("ses_a", second.ID)); err != nil || h.Base != first.ID {
		t.Fatalf("the second checkpoint is not a delta on the first: %+v %v", h, err)
	}
	// A cap a byte under the two: the first goes, and enough with it.
	if n := len(diskBlobs(t, s)); n != 21 {
		t.Fatalf("%d blobs", n)
	}
	s = New(dir, Options{MaxTreeBytes: diskTreeBytes(t, s, "ses_a") - 1})
	ps := pruneChecked(t, s, "ses_a", "ses_a")
	if len(ps) != 1 || ps[0].CheckpointID != first.ID || ps[0].RemovedBytes != ps[0].FreedBytes {
		t.Fatalf("pruned %+v", ps)
	}
	if n := len(diskBlobs(t, s)); n != 20 {
		t.Fatalf("%d blobs after the prune, want the second checkpoint's 20", n)
	}
	if h, _, err := s.readEntries(s.entriesPath("ses_a", second.ID)); err != nil || h.Base != "" {
		t.Fatalf("the second checkpoint still names a base: %+v %v", h, err)
	}
	writeRandom(t, ws, "f01", 1000)
	third, err := s.Create(ctx, "ses_a", "t3", ws)
	must(t, err)
	for _, st := range []*Store{s, New(s.dir, Options{})} {
		dst := t.TempDir()
		if _, err := st.Restore(ctx, "ses_a", second.ID, dst); err != nil {
			t.Fatal(err)
		}
		sameContent(t, "the second checkpoint", want, tree(t, dst))
		// The third over the second's files.
		if _, err := st.Restore(ctx, "ses_a", third.ID, dst); err != nil {
			t.Fatal(err)
		}
		sameContent(t, "the third checkpoint", tree(t, ws), tree(t, dst))
	}
	sameAsRescan(t, s)
}

// TestPruneRewritesEveryDeltaOnIt: two checkpoints that are deltas on the
// pruned one (a commit that failed after its metadata leaves a second)
// are both written whole, and both restore.
func TestPruneRewritesEveryDeltaOnIt(t *testing.T) {
	s, ws, first, second := deltaOnFirst(t)
	dir := s.dir
	want := tree(t, ws)
	// A third, the same delta on the first.
	const third = "ckpt_7zzzzzzzzzzzzzzzzzzzzzzzzz"
	must(t, copyFileTo(s.entriesPath("ses_a", second.ID), s.entriesPath("ses_a", third)))
	meta, err := os.ReadFile(s.metaPath("ses_a", second.ID))
	must(t, err)
	must(t, os.WriteFile(s.metaPath("ses_a", third), []byte(strings.Replace(string(meta), second.ID, third, 1)), 0o600))

	s = New(dir, Options{MaxTreeBytes: 1})
	ps := pruneChecked(t, s, "ses_a", "ses_a")
	if len(ps) != 2 || ps[0].CheckpointID != first.ID || ps[1].CheckpointID != second.ID {
		t.Fatalf("pruned %+v", ps)
	}
	restoresAs(t, s, "ses_a", third, "the third checkpoint", want)
	sameAsRescan(t, s)
}

// TestPruneLeavesBlobsAnotherTreeNames: a blob of a pruned checkpoint that
// another tree's checkpoint names too leaves the pruned tree's count, not
// the disk.
func TestPruneLeavesBlobsAnotherTreeNames(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{MaxTreeBytes: 6000})
	ws, other := t.TempDir(), t.TempDir()
	writeRandom(t, ws, "shared", 4000)
	must(t, copyFileTo(filepath.Join(ws, "shared"), filepath.Join(other, "copy")))
	oc, err := s.Create(ctx, "ses_b", "t", other)
	must(t, err)
	_, err = s.Create(ctx, "ses_a", "t1", ws)
	must(t, err)
	must(t, os.Remove(filepath.Join(ws, "shared")))
	writeRandom(t, ws, "new", 4000)
	_, err = s.Create(ctx, "ses_a", "t2", ws)
	must(t, err)
	before := diskBlobs(t, s)
	ps := pruneChecked(t, s, "ses_a", "ses_a")
	if len(ps) != 1 || ps[0].RemovedBytes != ps[0].FreedBytes-4096 {
		t.Fatalf("pruned %+v", ps)
	}
	if !maps.Equal(before, diskBlobs(t, s)) {
		t.Fatal("a blob another tree names was removed")
	}
	if got := treeBytes(s, "ses_b"); got != diskTreeBytes(t, s, "ses_b") {
		t.Fatalf("the other tree counts %d", got)
	}
	restoresAs(t, s, "ses_b", oc.ID, "the other tree", tree(t, other))
	sameAsRescan(t, s)
}

// TestFreeKeepsABlobNamedAgain: a blob a prune left to no checkpoint, that
// a create names again before the prune removes it, stays.
func TestFreeKeepsABlobNamedAgain(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{MaxTreeBytes: 1})
	ws, other := t.TempDir(), t.TempDir()
	writeRandom(t, ws, "f", 5000)
	first, err := s.Create(ctx, "ses_a", "t1", ws)
	must(t, err)
	must(t, copyFileTo(filepath.Join(ws, "f"), filepath.Join(other, "again")))
	writeRandom(t, ws, "f", 5000)
	_, err = s.Create(ctx, "ses_a", "t2", ws)
	must(t, err)
	must(t, s.ensureIndex())
	// The prune's first step, then a create of the other tree, then the
	// blobs' removal.
	unlock := s.lockSession("ses_a")
	s.gc.RLock()
	p, ix, dead, err := s.removeOldest("ses_a", candidate{"ses_a", first.ID}, nil)
	s.gc.RUnlock()
	unlock()
	if err != nil || p == nil || len(dead) != 1 {
		t.Fatalf("pruned %+v, dead %v: %v", p, dead, err)
	}
	again, err := s.Create(ctx, "ses_b", "t1", other)
	must(t, err)
	if n := s.free(ix, dead); n != 0 {
		t.Fatalf("removed %d bytes a checkpoint names again", n)
	}
	restoresAs(t, s, "ses_b", again.ID, "the checkpoint naming it again", tree(t, other))
	sameAsRescan(t, s)
}

// copyFileTo copies a file's content.
func copyFileTo(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// TestAccountingReadsNoOtherManifest: once counted, a checkpoint, a prune
// and a delete read only their own session's manifests, however many
// other sessions the store holds.
func TestAccountingReadsNoOtherManifest(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{MaxTreeBytes: 30 << 10})
	for i := range 40 {
		ws := t.TempDir()
		writeRandom(t, ws, "f", 1000)
		for turn := range 3 {
			write(t, ws, "g", fmt.Sprint(turn), 0o644)
			if _, err := s.Create(ctx, fmt.Sprintf("ses_%02d", i), "t", ws); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	s.manifestReads.Store(0)
	pruned := 0
	for round := range 6 {
		writeRandom(t, ws, "f", 20<<10)
		if _, err := s.CreateIn(ctx, "ses_root", []string{"ses_root", "ses_kid"}[round%2], "t", ws); err != nil {
			t.Fatal(err)
		}
		ps, err := s.Prune("ses_root", nil)
		must(t, err)
		pruned += len(ps)
	}
	must(t, s.Delete("ses_07"))
	// Each prune reads the pruned checkpoint and the one after it; the
	// delete the deleted session's three.
	if n := s.manifestReads.Load(); pruned < 4 || n > int64(2*pruned+3) {
		t.Fatalf("%d manifests read for 6 checkpoints, %d prunes and a delete", n, pruned)
	}
	sameAsRescan(t, s)
}

// TestSweepRepairsWhatACrashLeft: what a create, a prune or a delete
// killed midway leaves is removed by the next store's sweep (a manifest
// without metadata, temporary files, blobs nothing names), and nothing a
// listed checkpoint needs; a manifest that cannot be read keeps every
// blob.
func TestSweepRepairsWhatACrashLeft(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{})
	ws := t.TempDir()
	writeRandom(t, ws, "kept", 1000)
	kept, err := s.Create(ctx, "ses_a", "t1", ws)
	must(t, err)
	writeRandom(t, ws, "gone", 1000)
	torn, err := s.Create(ctx, "ses_a", "t2", ws)
	must(t, err)
	// A prune killed between the metadata and the manifest; a write
	// killed before its rename, in the session's directory and the blobs'.
	must(t, os.Remove(s.metaPath("ses_a", torn.ID)))
	must(t, os.WriteFile(filepath.Join(s.sessionDir("ses_a"), tempPrefix+"1"), nil, 0o600))
	must(t, os.WriteFile(filepath.Join(s.blobDir(), tempPrefix+"2"), nil, 0o600))
	s2 := New(s.dir, Options{})
	if n, err := s2.Sweep(); err != nil || n != 4 {
		t.Fatalf("sweep removed %d: %v", n, err)
	}
	if _, err := os.Stat(s.entriesPath("ses_a", torn.ID)); !os.IsNotExist(err) {
		t.Fatalf("the torn manifest: %v", err)
	}
	dst := t.TempDir()
	if _, err := s2.Restore(ctx, "ses_a", kept.ID, dst); err != nil {
		t.Fatal(err)
	}
	if want := named(t, s2, "ses_a"); !maps.Equal(diskBlobs(t, s2), want) {
		t.Fatalf("blobs %v, named %v", diskBlobs(t, s2), want)
	}

	// A damaged manifest: listed, counted as naming no blob, and no blob
	// is swept on a guess.
	writeRandom(t, ws, "more", 1000)
	bad, err := s2.Create(ctx, "ses_b", "t1", ws)
	must(t, err)
	must(t, os.WriteFile(s.entriesPath("ses_b", bad.ID), []byte("{not json"), 0o600))
	blobs := diskBlobs(t, s2)
	s3 := New(s.dir, Options{})
	if _, err := s3.Sweep(); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(blobs, diskBlobs(t, s3)) {
		t.Fatal("a sweep with a damaged manifest removed blobs")
	}
	if got := treeBytes(s3, "ses_b"); got != ownFiles(t, s3, "ses_b") {
		t.Fatalf("a damaged checkpoint counts %d bytes", got)
	}
}

// OverBudget says whether a Prune would have work: true before the store
// has counted its trees, then only while the tree is past its bytes.
func TestOverBudgetSaysWhenAPruneHasWork(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{MaxTreeBytes: 128 << 10})
	if !s.OverBudget("ses_root") {
		t.Fatal("a store that has not counted its trees says a prune has no work")
	}
	ws := t.TempDir()
	write(t, ws, "small", "x", 0o644)
	_, err := s.Create(ctx, "ses_root", "turn_1", ws)
	must(t, err)
	_, err = s.Prune("ses_root", nil)
	must(t, err)
	writeRandom(t, ws, "big", 80<<10)
	_, err = s.Create(ctx, "ses_root", "turn_2", ws)
	must(t, err)
	if s.OverBudget("ses_root") || s.OverBudget("ses_none") {
		t.Fatalf("a tree under its bytes (%d of 128 KiB), or none, is over budget", treeBytes(s, "ses_root"))
	}
	writeRandom(t, ws, "big", 80<<10)
	_, err = s.Create(ctx, "ses_root", "turn_3", ws)
	must(t, err)
	if !s.OverBudget("ses_root") {
		t.Fatalf("a tree of %d bytes, cap 128 KiB, is not over budget", treeBytes(s, "ses_root"))
	}
	ps, err := s.Prune("ses_root", nil)
	must(t, err)
	if len(ps) == 0 || s.OverBudget("ses_root") {
		t.Fatalf("pruned %d; the tree (%d bytes) is over budget after", len(ps), treeBytes(s, "ses_root"))
	}
}
