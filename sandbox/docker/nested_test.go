package docker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth"
)

// Binds nest as a worktree session needs them (session.worktreeBinds): a
// repository's git directory read-only, a directory in it read-write, and
// one in that read-only again, each at its own path; a read-only mount
// ([[sandbox.mounts]]) beside. Writes land only where a bind is writable.
func TestNestedBindsAsAWorktreeNeeds(t *testing.T) {
	p := newProvider(t, Options{})
	git := filepath.Join(t.TempDir(), "repo", ".git")
	objects, pack, cache := filepath.Join(git, "objects"), filepath.Join(git, "objects", "pack"), t.TempDir()
	for _, d := range []string{pack, cache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cache, "pkg"), []byte("cached"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		// The daemon hands writable binds to the sandbox's user only as root.
		if err := os.Chmod(objects, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	sb := openSandbox(t, p, berth.SandboxConfig{Binds: []berth.Bind{
		{Source: git, Target: git},
		{Source: objects, Target: objects, Writable: true},
		{Source: pack, Target: pack},
		{Source: cache, Target: "/cache/pkgs"},
	}})
	script := `cat /cache/pkgs/pkg && mkdir ` + objects + `/ab && echo o > ` + objects + `/ab/cd && ` +
		`! touch ` + git + `/config 2>/dev/null && ! touch ` + pack + `/p.pack 2>/dev/null && ! touch /cache/pkgs/x 2>/dev/null && echo ok`
	if res := run(t, sb, nil, "sh", "-c", script); res.status.Code != 0 || res.stdout != "cachedok\n" {
		t.Fatalf("%+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(objects, "ab", "cd")); err != nil || string(b) != "o\n" {
		t.Fatalf("object on the host: %q, %v", b, err)
	}
	for _, p := range []string{filepath.Join(git, "config"), filepath.Join(pack, "p.pack"), filepath.Join(cache, "x")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s written: %v", p, err)
		}
	}
}
