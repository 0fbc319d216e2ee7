package objstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/testenv"
)

// hashOf is the hex SHA-256 of s.
func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// objectBytes sums the sizes of the objects under prefix.
func objectBytes(t *testing.T, c *Client, prefix string) int64 {
	t.Helper()
	var n int64
	if err := c.List(testenv.Context(t), prefix, func(_ string, size int64) error { n += size; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// restoreInto restores the manifest tr into a fresh directory and
// returns that directory.
func restoreInto(t *testing.T, c *Client, tr *Tree) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "r")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RestoreTree(testenv.Context(t), c, tr, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A tree of every kind — small files (some the same bytes), files of
// PackMaxFile bytes and one more, empty files, links, directories, a
// read-only one, modes with a set-id bit — comes back exactly: its small
// files from one pack holding each content once, its larger ones from
// blobs.
func TestPackRoundTrip(t *testing.T) {
	c := openTest(t)
	ws := t.TempDir()
	atMax := strings.Repeat("m", PackMaxFile)
	overMax := strings.Repeat("o", PackMaxFile+1)
	large := strings.Repeat("large ", 50_000)
	writeTree(t, ws, map[string]string{
		"a.txt": "alpha", "same1": "shared bytes", "d/same2": "shared bytes", "d/e/same3": "shared bytes",
		"d/b.go": "package b", "max": atMax, "over": overMax, "big/large.bin": large,
		"empty": "", "d/empty2": "", "d/e/link": "->../b.go", "dirlink": "->d/e", "d/void/": "/",
		"ro/f": "in a read-only dir",
	})
	if err := os.Chmod(filepath.Join(ws, "d/b.go"), 0o755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(ws, "ro"), 0o755) })
	want := treeOf(t, ws)
	want["d/b.go"] = "file -rwxr-xr-x package b"

	u := NewUploader(c, t.TempDir())
	tr, _, err := u.Tree(testenv.Context(t), ws, checkpoint.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := restoreInto(t, c, tr)
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dst, "ro"), 0o755) })
	if got := treeOf(t, dst); !equal(got, want) {
		t.Errorf("restored:\n%v\nwant\n%v", got, want)
	}

	// Each small content once: "shared bytes" three times is one copy.
	small := int64(len("alpha") + len("shared bytes") + len("package b") + len(atMax) + len("in a read-only dir"))
	if n, size := countObjects(t, c, "packs/"), objectBytes(t, c, "packs/"); n != 1 || size != small {
		t.Errorf("%d packs of %d bytes, want 1 of %d", n, size, small)
	}
	if n := countObjects(t, c, "blobs/"); n != 2 || u.Puts() != 3 {
		t.Errorf("%d blobs stored, %d objects put; want 2 (over, large.bin) and 3", n, u.Puts())
	}
	for _, f := range tr.Files {
		packed := f.Pack != ""
		if f.Kind == checkpoint.KindFile && packed != (f.Size > 0 && f.Size <= PackMaxFile) {
			t.Errorf("%s (%d bytes) packed: %v", f.Path, f.Size, packed)
		}
	}
}

// A second Tree of an unchanged tree puts nothing, with or without the
// previous walk, and so does another session's tree of the same files;
// a tree where one small file changed puts one pack of that file alone.
func TestPackSecondTree(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	ws := t.TempDir()
	files := map[string]string{"big": strings.Repeat("b", PackMaxFile+10)}
	for _, d := range []string{"x", "y", "z"} {
		for _, f := range []string{"1", "2", "3", "4"} {
			files[d+"/"+f] = "content of " + d + f
		}
	}
	writeTree(t, ws, files)
	u := NewUploader(c, t.TempDir())
	first, prev, err := u.Tree(ctx, ws, checkpoint.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() (int, int) { return countObjects(t, c, "packs/"), countObjects(t, c, "blobs/") }
	packs, blobs := stored()
	puts := u.Puts()
	if packs != 1 || blobs != 1 {
		t.Fatalf("first tree: %d packs, %d blobs; want 1 and 1", packs, blobs)
	}

	for name, p := range map[string]map[string]checkpoint.Entry{"with the previous walk": prev, "read again": nil} {
		again, _, err := u.Tree(ctx, ws, checkpoint.Options{}, nil, p)
		if err != nil {
			t.Fatal(err)
		}
		if np, nb := stored(); np != packs || nb != blobs || u.Puts() != puts {
			t.Errorf("unchanged, %s: %d packs, %d blobs, %d more put", name, np, nb, u.Puts()-puts)
		}
		for i, f := range again.Files {
			if f != first.Files[i] {
				t.Errorf("unchanged, %s: %+v, was %+v", name, f, first.Files[i])
			}
		}
	}

	other := t.TempDir()
	writeTree(t, other, map[string]string{"copy/of/x1": "content of x1", "y4": "content of y4"})
	if _, _, err := u.Tree(ctx, other, checkpoint.Options{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if np, nb := stored(); np != packs || nb != blobs {
		t.Errorf("another tree of the same files: %d packs, %d blobs", np, nb)
	}

	changed := "content of y2, edited"
	if err := os.WriteFile(filepath.Join(ws, "y/2"), []byte(changed), 0o640); err != nil {
		t.Fatal(err)
	}
	bytesBefore := objectBytes(t, c, "packs/")
	third, _, err := u.Tree(ctx, ws, checkpoint.Options{}, nil, prev)
	if err != nil {
		t.Fatal(err)
	}
	if np, nb := stored(); np != packs+1 || nb != blobs {
		t.Errorf("one file changed: %d packs, %d blobs; want %d and %d", np, nb, packs+1, blobs)
	}
	if grown := objectBytes(t, c, "packs/") - bytesBefore; grown != int64(len(changed)) {
		t.Errorf("the new pack has %d bytes, want the changed file's %d", grown, len(changed))
	}
	files["y/2"] = changed
	dst := restoreInto(t, c, third)
	got := treeOf(t, dst)
	for p, content := range files {
		if got[p] != "file -rw-r----- "+content {
			t.Errorf("%s restored as %q", p, got[p])
		}
	}
}

// A state written before packs (version 1: every file a blob, the empty
// one too) still restores.
func TestRestoreVersion1State(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	files := []File{
		{Path: "d", Kind: checkpoint.KindDir, Mode: 0o750},
		{Path: "d/f", Kind: checkpoint.KindFile, Mode: 0o640, Size: 5, SHA256: hashOf("hello")},
		{Path: "e", Kind: checkpoint.KindFile, Mode: 0o600, SHA256: hashOf("")},
		{Path: "l", Kind: checkpoint.KindSymlink, Mode: 0o777, Target: "d/f"},
		{Path: "x", Kind: checkpoint.KindFile, Mode: 0o755, Size: 5, SHA256: hashOf("world")},
	}
	for _, body := range []string{"hello", "", "world"} {
		if err := c.Put(ctx, BlobKey(hashOf(body)), strings.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.putJSON(ctx, StateKey("ses_v1"), State{V: 1, SessionID: "ses_v1", Seq: 7, Workspace: &Tree{Files: files}}); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	st, err := Restore(ctx, c, "ses_v1", dst, "", RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"d": "dir -rwxr-x---", "d/f": "file -rw-r----- hello", "e": "file -rw------- ",
		"l": "link d/f", "x": "file -rwxr-xr-x world"}
	if got := treeOf(t, dst); st.Seq != 7 || !equal(got, want) {
		t.Errorf("seq %d, restored %v", st.Seq, got)
	}
	// A version this berth does not know is refused.
	if err := c.putJSON(ctx, StateKey("ses_v9"), State{V: StateVersion + 1, SessionID: "ses_v9", Workspace: &Tree{Files: files}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(ctx, c, "ses_v9", t.TempDir(), "", RestoreOptions{}); berth.ErrorCode(err) != berth.EInternal {
		t.Errorf("version %d: %v, want internal", StateVersion+1, err)
	}
}

// A state whose packed files name bytes past their pack's end, a
// negative or huge size or offset, overlapping bytes, a pack that is not
// a pack's name, or bytes that are not their hash's is refused as
// damaged, and nothing is written, inside the directory or outside.
func TestRestoreRefusesDamagedPacks(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	const body = "helloworld"
	pack := hashOf(body)
	if err := c.Put(ctx, PackKey(pack), strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	// A blob where a pack key that is not a pack's name could lead.
	hello := hashOf("hello")
	if err := c.Put(ctx, BlobKey(hello), strings.NewReader("hello"), 5); err != nil {
		t.Fatal(err)
	}
	file := func(p string, off, size int64, content string) File {
		return File{Path: p, Kind: checkpoint.KindFile, Mode: 0o644, Size: size, SHA256: hashOf(content), Pack: pack, Offset: off}
	}
	// Both files' bytes are their hash's: only the overlap is wrong.
	overlap := []File{file("a", 0, 5, "hello"), file("b", 3, 5, "lowor")}
	cases := map[string][]File{
		"past_end":     {file("f", 100, 5, "hello")},
		"partly_past":  {file("f", 8, 5, "ld")},
		"neg_size":     {file("f", 0, -5, "")},
		"neg_offset":   {file("f", -1, 5, "hello")},
		"huge_size":    {file("f", 0, 1<<40, body)},
		"huge_offset":  {file("f", math.MaxInt64-2, 5, "hello")},
		"overlap":      overlap,
		"same_offset":  {file("a", 0, 5, "hello"), file("b", 0, 10, body)},
		"bad_bytes":    {file("f", 5, 5, "hello")},
		"not_a_pack":   {{Path: "f", Kind: checkpoint.KindFile, Mode: 0o644, Size: 5, SHA256: hello, Pack: "../../blobs/sha256/" + hello[:2] + "/" + hello}},
		"short_pack":   {{Path: "f", Kind: checkpoint.KindFile, Mode: 0o644, Size: 5, SHA256: hello, Pack: pack[:63]}},
		"no_pack":      {{Path: "f", Kind: checkpoint.KindFile, Mode: 0o644, Size: 5, SHA256: hello, Offset: 3}},
		"empty_hashed": {{Path: "f", Kind: checkpoint.KindFile, Mode: 0o644, SHA256: hello}},
	}
	parent := t.TempDir()
	for name, files := range cases {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		err := RestoreTree(ctx, c, &Tree{Files: files}, dir, RestoreOptions{})
		if berth.ErrorCode(err) != berth.EInternal {
			t.Errorf("%s: %v, want internal", name, err)
		}
		t.Logf("%s: %v", name, err)
		if got := treeOf(t, dir); len(got) != 0 {
			t.Errorf("%s: left %v", name, got)
		}
	}
	if ents, _ := os.ReadDir(parent); len(ents) != len(cases) {
		t.Errorf("something was written beside the directories: %v", ents)
	}
	// Right places restore (two files may share the same bytes): the
	// cases above fail for what they break.
	dst := restoreInto(t, c, &Tree{Files: []File{file("a", 0, 5, "hello"), file("b", 5, 5, "world"), file("c", 0, 5, "hello")}})
	want := map[string]string{"a": "file -rw-r--r-- hello", "b": "file -rw-r--r-- world", "c": "file -rw-r--r-- hello"}
	if got := treeOf(t, dst); !equal(got, want) {
		t.Errorf("restored %v, want %v", got, want)
	}
}

// A daemon that restarted (a new Uploader) learns where the packs of a
// session's stored state hold its files at its first write, and packs
// none again: not even a session whose files are spread over the packs
// of several writes. A pack shorter than the state says is not learnt:
// its files are packed again.
func TestLearnStoredPacks(t *testing.T) {
	c := openTest(t)
	ws := t.TempDir()
	files := map[string]string{}
	for i := range 12 {
		files[fmt.Sprintf("d%d/f%d", i%3, i)] = fmt.Sprintf("file %d's content", i)
	}
	writeTree(t, ws, files)
	// One daemon's two writes: the second packs the edited file alone.
	first := NewUploader(c, "")
	syncWith(t, first, "ses_l", Target{Seq: 1, Workspace: ws})
	edited := "file 4's content, edited"
	if err := os.WriteFile(filepath.Join(ws, "d1/f4"), []byte(edited), 0o640); err != nil {
		t.Fatal(err)
	}
	syncWith(t, first, "ses_l", Target{Seq: 2, Workspace: ws})
	if n := countObjects(t, c, "packs/"); n != 2 {
		t.Fatalf("%d packs after two writes, want 2", n)
	}

	u := NewUploader(c, "")
	syncWith(t, u, "ses_l", Target{Seq: 3, Workspace: ws})
	if n := countObjects(t, c, "packs/"); n != 2 || u.Puts() != 0 {
		t.Errorf("a restarted daemon's first write: %d packs, %d objects put; want 2 and none", n, u.Puts())
	}

	// The second write's pack, damaged: cut short.
	var short string
	for _, f := range mustState(t, c, "ses_l").Workspace.Files {
		if f.Path == "d1/f4" {
			short = f.Pack
		}
	}
	if err := c.Put(testenv.Context(t), PackKey(short), strings.NewReader("cut"), 3); err != nil {
		t.Fatal(err)
	}
	u = NewUploader(c, "")
	syncWith(t, u, "ses_l", Target{Seq: 4, Workspace: ws})
	if u.Puts() != 1 || u.PutBytes() != int64(len(edited)) {
		t.Errorf("with a pack cut short: %d objects of %d bytes put; want the edited file's pack alone (%d bytes)", u.Puts(), u.PutBytes(), len(edited))
	}
	// The same bytes make the same pack: the one cut short is whole again.
	if size, _, err := c.Stat(testenv.Context(t), PackKey(short)); err != nil || size != int64(len(edited)) {
		t.Errorf("the pack cut short is %d bytes (%v), want %d", size, err, len(edited))
	}
	got := treeOf(t, restoreInto(t, c, mustState(t, c, "ses_l").Workspace))
	for p, content := range map[string]string{"d1/f4": edited, "d0/f0": files["d0/f0"]} {
		if got[p] != "file -rw-r----- "+content {
			t.Errorf("%s restored as %q", p, got[p])
		}
	}
}

// mustState reads the session's state.
func mustState(t *testing.T, c *Client, id string) *State {
	t.Helper()
	st, err := ReadState(testenv.Context(t), c, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
