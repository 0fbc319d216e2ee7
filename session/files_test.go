package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/session/wsfiles"
)

// files are written into the workspace before the agent starts: nested
// paths get their directories, each file mode 0644, an existing file is
// replaced.
func TestCreateWritesFiles(t *testing.T) {
	e := newEnv(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "old.txt"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := e.create(berth.CreateRequest{Workspace: ws, Files: map[string]string{
		"AGENTS.md": "be nice\n", "deep/er/dir/x.json": `{"a":1}`, "old.txt": "new", "empty": ""}})
	for p, want := range map[string]string{"AGENTS.md": "be nice\n", "deep/er/dir/x.json": `{"a":1}`, "old.txt": "new", "empty": ""} {
		full := filepath.Join(s.Workspace, p)
		got, err := os.ReadFile(full)
		if err != nil || string(got) != want {
			t.Fatalf("%s = %q, %v", p, got, err)
		}
		if fi, _ := os.Stat(full); fi.Mode().Perm() != 0o644 {
			t.Fatalf("%s mode %v", p, fi.Mode())
		}
	}
	// The agent sees them from its first turn (a managed workspace too).
	m := e.create(berth.CreateRequest{Files: map[string]string{"notes/hello.txt": "hi"}})
	if b, err := os.ReadFile(filepath.Join(m.Workspace, "notes/hello.txt")); err != nil || string(b) != "hi" {
		t.Fatalf("managed workspace file = %q, %v", b, err)
	}
	// No temporary file is left beside them.
	entries, _ := os.ReadDir(ws)
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), ".berth-file-") {
			t.Fatalf("temporary file left: %s", en.Name())
		}
	}
}

// A file that would land outside the workspace, go through a symbolic
// link, replace a directory, or exceed a bound is refused with the path
// named, and none of the request's files is written, nor a session made.
func TestCreateFilesRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "target"), filepath.Join(ws, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	many := map[string]string{}
	for i := range wsfiles.MaxCreateFiles + 1 {
		many[strings.Repeat("f", 1+i%50)+"/"+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = ""
	}
	big := strings.Repeat("x", wsfiles.MaxCreateFileBytes+1)
	total := map[string]string{}
	for i := range 5 {
		total[string(rune('a'+i))] = strings.Repeat("x", wsfiles.MaxCreateFileBytes)
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		code  string
		path  string
	}{
		{"dotdot", map[string]string{"0ok": "1", "../escape": "x"}, berth.EInvalid, "../escape"},
		{"inner dotdot", map[string]string{"0ok": "1", "a/../../escape": "x"}, berth.EInvalid, "a/../../escape"},
		{"absolute", map[string]string{"0ok": "1", "/etc/x": "x"}, berth.EInvalid, "/etc/x"},
		{"empty component", map[string]string{"0ok": "1", "a//b": "x"}, berth.EInvalid, "a//b"},
		{"dot", map[string]string{"0ok": "1", "./a": "x"}, berth.EInvalid, "./a"},
		{"through a link", map[string]string{"0ok": "1", "link/x": "x"}, berth.EInvalid, "link/x"},
		{"onto a dangling link's target", map[string]string{"0ok": "1", "dangling/x": "x"}, berth.EInvalid, "dangling/x"},
		{"over a directory", map[string]string{"0ok": "1", "adir": "x"}, berth.EInvalid, "adir"},
		{"under a file", map[string]string{"0ok": "1", "afile/x": "x"}, berth.EInvalid, "afile/x"},
		{"too many", many, berth.EInvalid, ""},
		{"one too large", map[string]string{"0ok": "1", "big": big}, berth.ETooLarge, "big"},
		{"all too large", total, berth.ETooLarge, ""},
	} {
		_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Workspace: ws, Files: tc.files})
		if berth.ErrorCode(err) != tc.code || !strings.Contains(berth.ErrorMessage(err), tc.path) {
			t.Errorf("%s: %v, want %s naming %q", tc.name, err, tc.code, tc.path)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "0ok")); !os.IsNotExist(err) {
		t.Fatalf("a refused request wrote a file: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("written outside the workspace: %v", entries)
	}
	if fi, err := os.Stat(filepath.Join(ws, "adir")); err != nil || !fi.IsDir() {
		t.Fatalf("the directory was replaced: %v", err)
	}
	if page, err := e.m.ListSessions(ctx, berth.SessionFilter{}); err != nil || len(page.Sessions) != 0 {
		t.Fatalf("sessions after refusals: %d, %v", len(page.Sessions), err)
	}
}

// The write itself never follows a link, even one planted after the
