package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/klauspost/compress/zstd"
)

// tarEntry is one entry of a crafted archive.
type tarEntry struct {
	typ  byte
	name string
	body string
	link string
	mode int64
}

// buildTar returns a tar stream of entries, written as given.
func buildTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	writeEntries(t, tw, entries...)
	must(t, tw.Close())
	return buf.Bytes()
}

// writeEntries writes entries to tw.
func writeEntries(t testing.TB, tw *tar.Writer, entries ...tarEntry) {
	t.Helper()
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Typeflag: e.typ, Name: e.name, Linkname: e.link, Mode: mode, ModTime: time.Unix(1700000000, 0)}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		must(t, tw.WriteHeader(h))
		if e.typ == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			must(t, err)
		}
	}
}

// putArchive stores the tar stream tarData, zstd-compressed, as a new
// snapshot of sessionID in s, and returns its id.
func putArchive(t testing.TB, s *Store, sessionID string, tarData []byte) string {
	t.Helper()
	snap := &Snapshot{ID: ids.New(idPrefix), SessionID: sessionID, CreatedAt: time.Now().UTC()}
	must(t, os.MkdirAll(s.sessionDir(sessionID), 0o700))
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	must(t, err)
	_, err = zw.Write(tarData)
	must(t, err)
	must(t, zw.Close())
	must(t, os.WriteFile(s.archivePath(sessionID, snap.ID), buf.Bytes(), 0o600))
	meta, err := json.Marshal(snap)
	must(t, err)
	must(t, os.WriteFile(s.metaPath(sessionID, snap.ID), meta, 0o600))
	return snap.ID
}

// file, dir, symlink and special make crafted entries.
func file(name, body string) tarEntry { return tarEntry{typ: tar.TypeReg, name: name, body: body} }
func dir(name string) tarEntry        { return tarEntry{typ: tar.TypeDir, name: name, mode: 0o755} }
func symlink(name, target string) tarEntry {
	return tarEntry{typ: tar.TypeSymlink, name: name, link: target, mode: 0o777}
}
func special(typ byte, name string) tarEntry { return tarEntry{typ: typ, name: name} }

// evilArchives are archives Restore must refuse with berth.EInvalid.
var evilArchives = []struct {
	name    string
	entries []tarEntry
}{
	{"dotdot", []tarEntry{file("../evil", "pwned")}},
	{"dotdot after a file", []tarEntry{file("ok.txt", "fine"), file("../evil", "pwned")}},
	{"absolute", []tarEntry{file("/abs", "pwned")}},
	{"absolute in tmp", []tarEntry{file("/tmp/berth-snapshot-evil", "pwned")}},
	{"dotdot inside", []tarEntry{dir("a/"), file("a/../../evil", "pwned")}},
	{"dotdot harmless", []tarEntry{file("a/../b", "still refused")}},
	{"dotdot dir", []tarEntry{dir("../evil/")}},
	{"symlink to /etc then through it", []tarEntry{symlink("link", "/etc"), file("link/passwd", "pwned")}},
	{"symlink up two", []tarEntry{symlink("l", "../..")}},
	{"symlink up one", []tarEntry{symlink("l", "..")}},
	{"nested symlink up", []tarEntry{symlink("a/b/l", "../../../outside")}},
	{"symlink out and back", []tarEntry{symlink("l", "../dst/x")}},
	{"through an inside symlink", []tarEntry{dir("d/"), symlink("sub", "d"), file("sub/x", "via link")}},
	{"mkdir through an inside symlink", []tarEntry{dir("d/"), symlink("sub", "d"), dir("sub/x/")}},
	{"symlink through a symlink", []tarEntry{symlink("s", "."), symlink("t", "s/..")}},
	{"symlink through a later symlink", []tarEntry{symlink("t", "s/.."), symlink("s", ".")}},
	{"symlink through a nested symlink", []tarEntry{dir("d/"), symlink("d/l", ".."), symlink("d/l2", "l/..")}},
	{"symlink to a symlink out", []tarEntry{symlink("s", "."), symlink("d/t", "../s/../x")}},
	{"empty symlink", []tarEntry{symlink("l", "")}},
	{"hard link", []tarEntry{file("a", "x"), {typ: tar.TypeLink, name: "b", link: "a"}}},
	{"hard link out", []tarEntry{{typ: tar.TypeLink, name: "b", link: "/etc/passwd"}}},
	{"fifo", []tarEntry{special(tar.TypeFifo, "fifo")}},
	{"char device", []tarEntry{special(tar.TypeChar, "null")}},
	{"block device", []tarEntry{special(tar.TypeBlock, "sda")}},
	{"contiguous file", []tarEntry{special(tar.TypeCont, "c")}},
	{"file then symlink", []tarEntry{file("a", "x"), symlink("a", "b")}},
	{"symlink then file", []tarEntry{symlink("a", "b"), file("a", "overwrite")}},
	{"file twice", []tarEntry{file("a", "x"), file("a", "y")}},
	{"dir then file", []tarEntry{dir("a/"), file("a", "x")}},
	{"file below a file", []tarEntry{file("f", "x"), file("f/g", "y")}},
	{"empty name", []tarEntry{file("", "x")}},
}

// listOutside returns the entries below parent outside dst, by name.
func listOutside(t testing.TB, parent, dst string) map[string]node {
	t.Helper()
	tree := readTree(t, parent)
	rel, _ := filepath.Rel(parent, dst)
	for name := range tree {
		if name == rel || strings.HasPrefix(name, rel+"/") {
			delete(tree, name)
		}
	}
	return tree
}

// restoreSetup makes a parent directory holding an "outside" directory with
// a file, and returns it with the dst path inside it (created when
// existing).
func restoreSetup(t testing.TB, existing bool) (parent, dst string) {
	t.Helper()
	parent = t.TempDir()
	must(t, os.Mkdir(filepath.Join(parent, "outside"), 0o755))
	must(t, os.WriteFile(filepath.Join(parent, "outside", "victim.txt"), []byte("victim"), 0o644))
	dst = filepath.Join(parent, "dst")
	if existing {
		must(t, os.Mkdir(dst, 0o755))
	}
	return parent, dst
}

// assertDstUntouched fails t unless dst is as before a failed restore:
// empty when it existed, absent otherwise.
func assertDstUntouched(t testing.TB, dst string, existed bool) {
	t.Helper()
	if existed {
		assertNoFiles(t, dst)
		return
	}
	if _, err := os.Lstat(dst); !os.IsNotExist(err) {
		t.Errorf("dst exists after a failed restore: %v", err)
	}
}

func TestRestoreRefusesEvilArchives(t *testing.T) {
	ctx := context.Background()
	passwd, _ := os.ReadFile("/etc/passwd")
	s := New(t.TempDir())
	for _, tc := range evilArchives {
		id := putArchive(t, s, "ses_evil", buildTar(t, tc.entries...))
		for _, existing := range []bool{false, true} {
			t.Run(tc.name, func(t *testing.T) {
				parent, dst := restoreSetup(t, existing)
				before := listOutside(t, parent, dst)
				err := s.Restore(ctx, id, dst)
				if !berth.IsCode(err, berth.EInvalid) {
					t.Fatalf("Restore = %v, want %s", err, berth.EInvalid)
				}
				t.Log(berth.ErrorMessage(err))
				compareTrees(t, listOutside(t, parent, dst), before)
				assertDstUntouched(t, dst, existing)
			})
		}
	}
	if _, err := os.Lstat("/tmp/berth-snapshot-evil"); !os.IsNotExist(err) {
		t.Errorf("/tmp/berth-snapshot-evil was written: %v", err)
	}
	if after, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(after, passwd) {
		t.Errorf("/etc/passwd changed")
	}
}

func TestRestoreAcceptsForeignArchives(t *testing.T) {
	// Archives as tar(1) writes them: a "./" root entry and "./" prefixes,
	// files before their directories' entries, a pax global header.
	ctx := context.Background()
	s := New(t.TempDir())
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "hi"}}))
	writeEntries(t, tw,
		dir("./"),
		file("./x/y/z.txt", "z"),
		dir("./x/"),
		symlink("./x/l", "y/z.txt"),
		symlink("./top", "x/l"),
		dir("./x/y/"),
	)
	must(t, tw.Close())
	id := putArchive(t, s, "ses_1", buf.Bytes())
	dst := filepath.Join(t.TempDir(), "dst")
	must(t, s.Restore(ctx, id, dst))
	b, err := os.ReadFile(filepath.Join(dst, "top"))
	if err != nil || string(b) != "z" {
		t.Fatalf("top reads %q, %v", b, err)
	}
}

func TestRestoreRefusesCorruptArchives(t *testing.T) {
	ctx := context.Background()
	s := New(t.TempDir())
	good := buildTar(t, file("a.txt", strings.Repeat("a", 4096)))
	for name, data := range map[string][]byte{
		"truncated": good[:1000],
		"garbage":   bytes.Repeat([]byte("garbage!"), 200),
	} {
		t.Run(name, func(t *testing.T) {
			id := putArchive(t, s, "ses_1", data)
			_, dst := restoreSetup(t, false)
			if err := s.Restore(ctx, id, dst); !berth.IsCode(err, berth.EInvalid) {
				t.Fatalf("Restore = %v, want %s", err, berth.EInvalid)
			}
			assertDstUntouched(t, dst, false)
		})
	}
	t.Run("not zstd", func(t *testing.T) {
		id := putArchive(t, s, "ses_1", good)
		must(t, os.WriteFile(s.archivePath("ses_1", id), good, 0o600))
		_, dst := restoreSetup(t, true)
		if err := s.Restore(ctx, id, dst); !berth.IsCode(err, berth.EInvalid) {
			t.Fatalf("Restore = %v, want %s", err, berth.EInvalid)
		}
		assertDstUntouched(t, dst, true)
	})
}

// checkInside fails t if a symlink below dst is absolute or resolves
// outside it.
func checkInside(t testing.TB, dst string) {
	t.Helper()
	realDst, err := filepath.EvalSymlinks(dst)
	must(t, err)
	_ = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			t.Errorf("readlink %s: %v", p, err)
			return nil
		}
		if filepath.IsAbs(target) {
			t.Errorf("%s -> %s: absolute", p, target)
		}
		if resolved, err := filepath.EvalSymlinks(p); err == nil && resolved != realDst && !strings.HasPrefix(resolved, realDst+string(filepath.Separator)) {
			t.Errorf("%s -> %s resolves to %s, outside %s", p, target, resolved, realDst)
		}
		return nil
	})
}

// specTar builds a tar stream from spec, the compact form of an archive
// that FuzzRestore mutates: one entry a line, "type|name|link or body|mode"
// with type a tar type flag and mode in octal (0644 when absent). Raw tar is
// a poor fuzz input: its header checksums make almost every mutation
// unreadable, and its size makes minimizing a new input outlast a short
// run. ok is false when the tar writer refuses spec.
func specTar(spec string) (data []byte, ok bool) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, line := range strings.Split(spec, "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "|", 4)
		for len(f) < 4 {
			f = append(f, "")
		}
		mode, err := strconv.ParseInt(f[3], 8, 64)
		if err != nil {
			mode = 0o644
		}
		typ := byte(tar.TypeReg)
		if f[0] != "" {
			typ = f[0][0]
		}
		h := &tar.Header{Typeflag: typ, Name: f[1], Mode: mode, ModTime: time.Unix(1700000000, 0)}
		switch h.Typeflag {
		case tar.TypeReg:
			h.Size = int64(len(f[2]))
		case tar.TypeSymlink, tar.TypeLink:
			h.Linkname = f[2]
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, false
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(f[2])); err != nil {
				return nil, false
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// entriesSpec returns the spec (see specTar) of entries.
func entriesSpec(entries []tarEntry) string {
	var b strings.Builder
	for _, e := range entries {
		arg := e.link
		if e.typ == tar.TypeReg {
			arg = e.body
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		fmt.Fprintf(&b, "%c|%s|%s|%o\n", e.typ, e.name, arg, mode)
	}
	return b.String()
}

// FuzzRestore extracts arbitrary archives (given as specs, see specTar) and
// checks that nothing is written outside the destination, that a refused
// archive leaves the destination as it was, and that a restored tree holds
// no symlink out. Its seeds are the crafted evil archives plus good ones.
func FuzzRestore(f *testing.F) {
	for _, tc := range evilArchives {
		f.Add(entriesSpec(tc.entries))
	}
	f.Add(entriesSpec([]tarEntry{
		dir("a/"), dir("a/b/"), file("a/b/c.txt", "hello"), symlink("a/l", "b/c.txt"),
		symlink("top", "a/b"), dir("empty/"), file("x", ""), {typ: tar.TypeReg, name: "ro", mode: 0o400},
		{typ: tar.TypeDir, name: "locked/", mode: 0o500}, file("locked/in", "in"),
	}))
	f.Add(entriesSpec([]tarEntry{symlink("s", "."), symlink("t", "s/a"), dir("a/"), file("a/f", "f")}))
	f.Add(entriesSpec([]tarEntry{dir("./"), file("./x/y", "y"), symlink("./x/z", "y"), dir("./x/")}))

	// One parent per process, so that an input costs few system calls.
	parent, dst := restoreSetup(f, false)
	before := listOutside(f, parent, dst)
	f.Fuzz(func(t *testing.T, spec string) {
		data, ok := specTar(spec)
		if !ok {
			return
		}
		existed := len(spec)%2 == 0
		if existed {
			must(t, os.Mkdir(dst, 0o755))
		}
		defer func() {
			makeWritable(dst)
			must(t, os.RemoveAll(dst))
		}()
		err := restoreTar(context.Background(), bytes.NewReader(data), dst, Options{MaxBytes: 1 << 20, MaxEntries: 256})
		compareTrees(t, listOutside(t, parent, dst), before)
		if err != nil {
			assertDstUntouched(t, dst, existed)
			return
		}
		checkInside(t, dst)
		ents, _ := os.ReadDir(dst)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), restorePrefix) {
				t.Errorf("restore directory left behind: %s", e.Name())
			}
		}
	})
}
