package objstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/testenv"
)

// syncSession writes session id's checkpoints of cs and its workspace ws
// with a Syncer of its own (a node's), and waits until it is recorded.
func syncSession(t *testing.T, c *Client, cs *checkpoint.Store, id, ws string) {
	t.Helper()
	synced := make(chan int64, 1)
	s := NewSyncer(SyncerOptions{Uploader: NewUploader(c, t.TempDir()), Checkpoints: cs,
		Resolve: func(context.Context, string, string) (Target, error) { return Target{Seq: 1, Workspace: ws}, nil },
		Synced:  func(_ context.Context, _ string, seq int64, _ time.Time) error { synced <- seq; return nil },
		Warn:    func(_, reason string) { t.Errorf("warning: %s", reason) },
	})
	defer s.Close(context.Background())
	s.TurnEnded(id, "turn_1")
	select {
	case <-synced:
	case <-time.After(time.Minute):
		t.Fatal("never synced")
	}
}

// idsOf lists the ids of cs's checkpoints of session id.
func idsOf(t *testing.T, cs *checkpoint.Store, id string) []string {
	t.Helper()
	list, err := cs.List(id)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.ID
	}
	return out
}

// The checkpoints a node synced come back into another node's checkpoint
// store, oldest first, each restoring the tree it recorded, in the
// session's tree (a child's counts in its root's); those the node had
// pruned by its last state stay out, one written after that state comes
// too; a second restore brings nothing. The Syncer of the new node does
// not write them again.
func TestRestoreCheckpoints(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	ws := t.TempDir()
	// A: the node the session ran on. Its cap keeps two checkpoints.
	a := checkpoint.New(t.TempDir(), checkpoint.Options{MaxTreeBytes: 30 << 10})
	want := map[string]map[string]string{}
	var made []string
	take := func(content string) {
		writeTree(t, ws, map[string]string{"f" + content: content})
		ck, err := a.CreateIn(ctx, "ses_root", "ses_kid", "turn_"+content, ws)
		if err != nil {
			t.Fatal(err)
		}
		want[ck.ID], made = treeOf(t, ws), append(made, ck.ID)
	}
	take("1")
	syncSession(t, c, a, "ses_kid", ws)
	take("2")
	take("3")
	if ps, err := a.Prune("ses_root", nil); err != nil || len(ps) != 1 || ps[0].CheckpointID != made[0] {
		t.Fatalf("prune on A: %+v %v", ps, err)
	}
	syncSession(t, c, a, "ses_kid", ws)
	// A checkpoint written by a sync that did not get to its state.json.
	take("4")
	if _, err := NewUploader(c, "").Checkpoint(ctx, a, "ses_kid", made[3], nil); err != nil {
		t.Fatal(err)
	}

	// B: the node it moves to.
	b := checkpoint.New(t.TempDir(), checkpoint.Options{MaxTreeBytes: 36 << 10})
	n, err := RestoreCheckpoints(ctx, c, b, "ses_root", "ses_kid", nil)
	if err != nil || n != 3 {
		t.Fatalf("restored %d checkpoints: %v", n, err)
	}
	if got := idsOf(t, b, "ses_kid"); !slices.Equal(got, made[1:]) {
		t.Fatalf("B lists %v, want %v (the first pruned on A)", got, made[1:])
	}
	for _, id := range made[1:] {
		dst := t.TempDir()
		if _, err := b.Restore(ctx, "ses_kid", id, dst); err != nil {
			t.Fatal(err)
		}
		if got := treeOf(t, dst); !equal(got, want[id]) {
			t.Fatalf("checkpoint %s restores as %v, want %v", id, got, want[id])
		}
	}
	if n, err := RestoreCheckpoints(ctx, c, b, "ses_root", "ses_kid", nil); err != nil || n != 0 {
		t.Fatalf("a second restore brought %d: %v", n, err)
	}

	// The new node's Syncer finds them in the store: the objects stay as
	// they are (a mark added to one is still there after its sync).
	key := CheckpointKey("ses_kid", made[1])
	var stored map[string]any
	if err := c.getJSON(ctx, key, &stored); err != nil {
		t.Fatal(err)
	}
	stored["mark"] = "not written again"
	if err := c.putJSON(ctx, key, stored); err != nil {
		t.Fatal(err)
	}
	syncSession(t, c, b, "ses_kid", ws)
	stored = nil
	if err := c.getJSON(ctx, key, &stored); err != nil || stored["mark"] != "not written again" {
		t.Fatalf("the new node wrote checkpoint %s again: %v", made[1], err)
	}
	st, err := ReadState(ctx, c, "ses_kid")
	if err != nil || !slices.Equal(st.Checkpoints, made[1:]) {
		t.Fatalf("the new node's state names %v (%v), want %v", st.Checkpoints, err, made[1:])
	}
	// They count in the root's tree: past B's cap, its prune takes the
	// oldest.
	if ps, err := b.Prune("ses_root", nil); err != nil || len(ps) != 1 || ps[0].CheckpointID != made[1] {
		t.Fatalf("prune of the root's tree on B: %+v %v", ps, err)
	}
}

// A damaged checkpoint in the store (not JSON, a path out of the
// workspace, another checkpoint's metadata, a blob the store lost) is
// passed over, nothing of it kept, and told; the whole ones, before and
// after it, are brought.
func TestRestoreCheckpointsPassesOverDamage(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"d/f": "whole"})
	a := checkpoint.New(t.TempDir(), checkpoint.Options{})
	ck, err := a.Create(ctx, "ses_dmg", "turn_1", ws)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewUploader(c, "").Checkpoint(ctx, a, "ses_dmg", ck.ID, nil); err != nil {
		t.Fatal(err)
	}
	var whole StoredCheckpoint
	if err := c.getJSON(ctx, CheckpointKey("ses_dmg", ck.ID), &whole); err != nil {
		t.Fatal(err)
	}
	damaged := func(edit func(s *StoredCheckpoint)) string {
		s := whole
		meta := *whole.Checkpoint
		meta.ID = ids.New("ckpt")
		s.Checkpoint, s.Files = &meta, slices.Clone(whole.Files)
		edit(&s)
		if err := c.putJSON(ctx, CheckpointKey("ses_dmg", meta.ID), s); err != nil {
			t.Fatal(err)
		}
		return meta.ID
	}
	escape := damaged(func(s *StoredCheckpoint) {
		s.Files = append(s.Files, File{Path: "../../escape", Kind: checkpoint.KindDir, Mode: 0o755})
	})
	other := damaged(func(s *StoredCheckpoint) { s.Checkpoint.ID = ck.ID })
	lost := damaged(func(s *StoredCheckpoint) {
		s.Files = append(s.Files, File{Path: "lost", Kind: checkpoint.KindFile, Mode: 0o644, Size: 4,
			SHA256: "0000000000000000000000000000000000000000000000000000000000000000"})
	})
	notJSON := ids.New("ckpt")
	if err := c.Put(ctx, CheckpointKey("ses_dmg", notJSON), strings.NewReader("{not json"), 9); err != nil {
		t.Fatal(err)
	}
	// A whole one after the damaged ones.
	writeTree(t, ws, map[string]string{"g": "later"})
	later, err := a.Create(ctx, "ses_dmg", "turn_2", ws)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewUploader(c, "").Checkpoint(ctx, a, "ses_dmg", later.ID, nil); err != nil {
		t.Fatal(err)
	}
	b := checkpoint.New(t.TempDir(), checkpoint.Options{})
	n, err := RestoreCheckpoints(ctx, c, b, "ses_dmg", "ses_dmg", nil)
	if n != 2 || !berth.IsCode(err, berth.EInternal) {
		t.Fatalf("restored %d, %v; want the two whole ones and an error", n, err)
	}
	if got := idsOf(t, b, "ses_dmg"); !slices.Equal(got, []string{ck.ID, later.ID}) {
		t.Fatalf("B lists %v, want only %s and %s (not %s, %s, %s, %s)", got, ck.ID, later.ID, escape, other, lost, notJSON)
	}
}

// A moved session's checkpoints take their blobs from the workspace just
// restored where it has them (NearBlobs): here the store lost the files'
// contents,
// and the checkpoint comes whole from the restored files; a restored file
// changed since is not taken for the blob it no longer holds.
func TestRestoreCheckpointsReadsTheRestoredFilesFirst(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a.txt": "alpha", "b.txt": "beta"})
	want := treeOf(t, ws)
	a := checkpoint.New(t.TempDir(), checkpoint.Options{})
	ck, err := a.Create(ctx, "ses_near", "turn_1", ws)
	if err != nil {
		t.Fatal(err)
	}
	syncSession(t, c, a, "ses_near", ws)
	restored := t.TempDir()
	st, err := Restore(ctx, c, "ses_near", restored, "", RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The store loses every file's content: the packs and blobs.
	var lost []string
	for _, prefix := range []string{"packs/", "blobs/"} {
		if err := c.List(ctx, prefix, func(key string, _ int64) error { lost = append(lost, key); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range lost {
		if err := c.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	b := checkpoint.New(t.TempDir(), checkpoint.Options{})
	if n, err := RestoreCheckpoints(ctx, c, b, "ses_near", "ses_near", nil); err == nil || n != 0 {
		t.Fatalf("without the restored files: %d checkpoints, %v (the store lost the contents)", n, err)
	}
	near, done := NearBlobs(restored, st.Workspace)
	defer done()
	if err := os.WriteFile(filepath.Join(restored, "b.txt"), []byte("BETA"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := RestoreCheckpoints(ctx, c, b, "ses_near", "ses_near", near); err == nil || n != 0 {
		t.Fatalf("with b.txt changed: %d checkpoints, %v", n, err)
	}
	if err := os.WriteFile(filepath.Join(restored, "b.txt"), []byte("beta"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := RestoreCheckpoints(ctx, c, b, "ses_near", "ses_near", near); err != nil || n != 1 {
		t.Fatalf("from the restored files: %d checkpoints, %v", n, err)
	}
	dst := t.TempDir()
	if _, err := b.Restore(ctx, "ses_near", ck.ID, dst); err != nil {
		t.Fatal(err)
	}
	if got := treeOf(t, dst); !equal(got, want) {
		t.Fatalf("the checkpoint restores as %v, want %v", got, want)
	}
}

// A session's checkpoints after the first a Syncer writes are stored as
// the changes since the one before (a turn's checkpoint of a large
// workspace is a few lines, not the whole manifest again), and come back
// whole on another node. A delta whose base the store lost, or whose
// chain loops, is passed over with the checkpoints resting on it; one
// that also claims to be whole is damaged.
func TestCheckpointsAreStoredAsDeltas(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	ws := t.TempDir()
	files := map[string]string{}
	for i := range 40 {
		files["d"+strconv.Itoa(i%4)+"/f"+strconv.Itoa(i)] = "content " + strconv.Itoa(i)
	}
	writeTree(t, ws, files)
	a := checkpoint.New(t.TempDir(), checkpoint.Options{})
	s := NewSyncer(SyncerOptions{Uploader: NewUploader(c, t.TempDir()), Checkpoints: a, Delay: time.Millisecond,
		Resolve: func(context.Context, string, string) (Target, error) { return Target{Seq: 1, Workspace: ws}, nil },
		Warn:    func(_, reason string) { t.Errorf("warning: %s", reason) },
	})
	defer s.Close(context.Background())
	want := map[string]map[string]string{}
	var made []string
	sync := func() {
		s.TurnEnded("ses_d", "turn")
		testenv.WaitFor(t, time.Minute, "the state naming the last checkpoint", func() bool {
			st, err := ReadState(ctx, c, "ses_d")
			return err == nil && slices.Contains(st.Checkpoints, made[len(made)-1])
		})
	}
	take := func(change func()) {
		change()
		ck, err := a.Create(ctx, "ses_d", "turn_"+strconv.Itoa(len(made)), ws)
		if err != nil {
			t.Fatal(err)
		}
		want[ck.ID], made = treeOf(t, ws), append(made, ck.ID)
	}
	take(func() {})
	sync()
	take(func() { writeTree(t, ws, map[string]string{"d0/f0": "changed"}) })
	take(func() { writeTree(t, ws, map[string]string{"new/g": "added"}) })
	take(func() { mustRemoveAll(t, filepath.Join(ws, "d1")) })
	take(func() { mustRemoveAll(t, filepath.Join(ws, "new")) })
	sync()

	var first StoredCheckpoint
	if err := c.getJSON(ctx, CheckpointKey("ses_d", made[0]), &first); err != nil || first.Delta != nil || len(first.Files) != 44 {
		t.Fatalf("the first checkpoint is stored with %d files, delta %v (%v), want whole", len(first.Files), first.Delta, err)
	}
	for i, id := range made[1:] {
		var stored StoredCheckpoint
		if err := c.getJSON(ctx, CheckpointKey("ses_d", id), &stored); err != nil {
			t.Fatal(err)
		}
		d := stored.Delta
		if d == nil || stored.Checkpoint != nil || stored.Files != nil || d.Base != made[i] || len(d.Files)+len(d.Removed) > 11 {
			t.Fatalf("checkpoint %d is stored as %+v, want a few changes since %s", i+1, stored, made[i])
		}
	}
	restore := func(label string, wantN int) *checkpoint.Store {
		t.Helper()
		b := checkpoint.New(t.TempDir(), checkpoint.Options{})
		n, err := RestoreCheckpoints(ctx, c, b, "ses_d", "ses_d", nil)
		if n != wantN || (wantN == len(made)) != (err == nil) {
			t.Fatalf("%s: restored %d checkpoints, %v; want %d", label, n, err, wantN)
		}
		return b
	}
	b := restore("whole", len(made))
	for _, id := range made {
		dst := t.TempDir()
		if _, err := b.Restore(ctx, "ses_d", id, dst); err != nil {
			t.Fatal(err)
		}
		if got := treeOf(t, dst); !equal(got, want[id]) {
			t.Fatalf("checkpoint %s restores as %v, want %v", id, got, want[id])
		}
	}

	// Damage, each undone after: the store's object of a checkpoint put
	// back as it was.
	damage := func(id string, v any, label string, wantN int) {
		t.Helper()
		var was StoredCheckpoint
		if err := c.getJSON(ctx, CheckpointKey("ses_d", id), &was); err != nil {
			t.Fatal(err)
		}
		if v == nil {
			if err := c.Delete(ctx, CheckpointKey("ses_d", id)); err != nil {
				t.Fatal(err)
			}
		} else if err := c.putJSON(ctx, CheckpointKey("ses_d", id), v); err != nil {
			t.Fatal(err)
		}
		restore(label, wantN)
		if err := c.putJSON(ctx, CheckpointKey("ses_d", id), was); err != nil {
			t.Fatal(err)
		}
	}
	var second StoredCheckpoint
	if err := c.getJSON(ctx, CheckpointKey("ses_d", made[2]), &second); err != nil {
		t.Fatal(err)
	}
	damage(made[0], nil, "the base of every delta lost", 0)
	loop := *second.Delta
	loop.Base = made[3]
	damage(made[2], StoredCheckpoint{Delta: &loop}, "a chain that loops", 2)
	damage(made[2], StoredCheckpoint{Checkpoint: second.Delta.Checkpoint, Delta: second.Delta}, "a delta that claims to be whole", 2)
	restore("put back", len(made))
}

// mustRemoveAll removes p and what it holds.
func mustRemoveAll(t *testing.T, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
}
