package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// berth create --worktree-repo/--worktree-branch makes a worktree session,
// --file writes files (a local file's content with @), show prints the
// worktree, and --mount of an unknown name is the daemon's 400 naming
// what is configured.
func TestCreateWorkspaceFlags(t *testing.T) {
	repo := gitRepo(t, t.TempDir())
	home := t.TempDir()
	s := startServer(t, home)
	local := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(local, []byte("from a local file"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := s.run(t, "create", "-q", "--sandbox", "host", "--worktree-repo", repo, "--worktree-branch", "agent/cli",
		"--file", "docs/notes.md=@"+local, "--file", "plain.txt=hello", "--file", "at.txt=@@home")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("create: exit %d, %q", code, out)
	}
	var got berth.Session
	if st, err := s.api("GET", "/v1/sessions/"+id, nil, &got); st != 200 {
		t.Fatalf("GET: %d %v", st, err)
	}
	if got.Worktree == nil || got.Worktree.Branch != "agent/cli" || got.Worktree.Base != "HEAD" {
		t.Fatalf("worktree = %+v", got.Worktree)
	}
	for rel, want := range map[string]string{"docs/notes.md": "from a local file", "plain.txt": "hello", "at.txt": "@home"} {
		if b, err := os.ReadFile(filepath.Join(got.Workspace, rel)); err != nil || string(b) != want {
			t.Fatalf("%s = %q, %v", rel, b, err)
		}
	}
	if out, code := s.run(t, "show", id); code != 0 || !strings.Contains(out, "branch agent/cli from HEAD") {
		t.Fatalf("show: exit %d, %q", code, out)
	}
	if out, code := s.run(t, "create", "--sandbox", "host", "--worktree-branch", "x"); code != 2 || !strings.Contains(out, "go together") {
		t.Fatalf("branch alone: exit %d, %q", code, out)
	}
	if out, code := s.run(t, "create", "--sandbox", "host", "--worktree-repo", repo, "--worktree-branch", "agent/cli"); code == 0 || !strings.Contains(out, "already exists") {
		t.Fatalf("an existing branch: exit %d, %q", code, out)
	}
	if out, code := s.run(t, "create", "--sandbox", "host", "--mount", "cache"); code == 0 || !strings.Contains(out, "unknown mount") {
		t.Fatalf("unknown mount: exit %d, %q", code, out)
	}
}

// gitRepo makes dir a git repository with one empty commit on main, and
// returns it (git missing: testenv.Missing).
func gitRepo(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git", "git is not installed")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "first")
	return dir
}

// git runs git in dir, as a fixed user and with none of the machine's
// configuration, and returns its output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	c.Dir, c.Env = dir, []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
