package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// needGit skips (or fails under BERTH_REQUIRE_INTEGRATION) without git.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git", "git is not installed")
	}
}

// git runs git in dir for a test, with a clean environment, and returns
// its trimmed output; it fails the test on an error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitMay(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// gitMay is git without failing.
func gitMay(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// newRepo makes a repository with one commit on main holding README.
func newRepo(t *testing.T) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "README")
	git(t, repo, "commit", "-q", "-m", "first")
	return repo
}

// worktreeIDs lists the repository's worktrees' directories.
func worktreeDirs(t *testing.T, repo string) string {
	return git(t, repo, "worktree", "list", "--porcelain")
}

// Create makes the workspace a new worktree on a new branch; the session
// says so; two sessions on one repository have their own trees; delete
// removes the worktree and keeps the branch with its commits.
func TestWorktreeCreateAndDelete(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	ctx := context.Background()
	repo := newRepo(t)
	a := e.create(berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/a"}})
	b := e.create(berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/b", Base: "main"}})
	real, _ := filepath.EvalSymlinks(repo)
	if a.Worktree == nil || a.Worktree.Repo != real || a.Worktree.Branch != "agent/a" || a.Worktree.Base != "HEAD" {
		t.Fatalf("worktree = %+v", a.Worktree)
	}
	if !a.ManagedWorkspace || a.Workspace == b.Workspace {
		t.Fatalf("workspaces %s %s", a.Workspace, b.Workspace)
	}
	for _, s := range []*berth.Session{a, b} {
		if got, err := os.ReadFile(filepath.Join(s.Workspace, "README")); err != nil || string(got) != "hello\n" {
			t.Fatalf("%s: README = %q, %v", s.ID, got, err)
		}
		if br := git(t, s.Workspace, "branch", "--show-current"); br != s.Worktree.Branch {
			t.Fatalf("%s is on %q", s.ID, br)
		}
	}
	// The API shows repo, branch and base, never the git directories.
	js := jsonOf(t, a)
	if !strings.Contains(js, `"worktree":{"repo":`) || strings.Contains(js, "worktrees/") {
		t.Fatalf("session JSON: %s", js)
	}
	// Parallel sessions never touch each other's files.
	if err := os.WriteFile(filepath.Join(a.Workspace, "only-a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.Workspace, "only-a")); !os.IsNotExist(err) {
		t.Fatalf("b sees a's file: %v", err)
	}
	git(t, a.Workspace, "add", "only-a")
	git(t, a.Workspace, "commit", "-q", "-m", "by a")

	// Stop and resume keep it.
	if _, err := e.m.StopSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.ResumeSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.GetSession(ctx, a.ID)
	if err != nil || got.Worktree == nil || got.Worktree.Branch != "agent/a" {
		t.Fatalf("after resume: %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(a.Workspace, "only-a")); err != nil {
		t.Fatal(err)
	}

	if err := e.m.DeleteSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Workspace); !os.IsNotExist(err) {
		t.Fatalf("worktree left after delete: %v", err)
	}
	if list := worktreeDirs(t, repo); strings.Contains(list, a.Workspace) || !strings.Contains(list, b.Workspace) {
		t.Fatalf("worktree list after delete:\n%s", list)
	}
	if entries, _ := os.ReadDir(filepath.Join(repo, ".git", "worktrees")); len(entries) != 1 {
		t.Fatalf("git directories of worktrees left: %v", entries)
	}
	if msg := git(t, repo, "log", "-1", "--format=%s", "agent/a"); msg != "by a" {
		t.Fatalf("branch agent/a after delete: %q", msg)
	}
}

// jsonOf is s as the API shows it.
func jsonOf(t *testing.T, s *berth.Session) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A bad worktree option is refused with its code, and nothing is written:
// no session, no workspace, no branch, no worktree.
func TestWorktreeRefusals(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	ctx := context.Background()
	repo := newRepo(t)
	git(t, repo, "branch", "taken")
	plain := t.TempDir()
	// A session's worktree is a git working tree, but the agent's.
	other := e.create(berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/other"}})
	for _, tc := range []struct {
		name string
		req  berth.CreateRequest
		code string
	}{
		{"relative repo", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: "repo", Branch: "x"}}, berth.EInvalid},
		{"missing repo", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo + "/nope", Branch: "x"}}, berth.EInvalid},
		{"not a repository", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: plain, Branch: "x"}}, berth.EInvalid},
		{"no branch", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo}}, berth.EInvalid},
		{"bad branch", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "a..b"}}, berth.EInvalid},
		{"option branch", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "-f"}}, berth.EInvalid},
		{"expanded branch", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "@{-1}"}}, berth.EInvalid},
		{"existing branch", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "taken"}}, berth.EConflict},
		{"unknown base", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "x", Base: "nope"}}, berth.EInvalid},
		{"option base", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "x", Base: "--orphan"}}, berth.EInvalid},
		{"with workspace", berth.CreateRequest{Workspace: plain, Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "x"}}, berth.EInvalid},
		{"in the daemon's home", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: e.home, Branch: "x"}}, berth.EInvalid},
		{"another session's worktree", berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: other.Workspace, Branch: "x"}}, berth.EInvalid},
	} {
		tc.req.Agent = "demo"
		if _, err := e.m.CreateSession(ctx, tc.req); berth.ErrorCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if page, err := e.m.ListSessions(ctx, berth.SessionFilter{}); err != nil || len(page.Sessions) != 1 {
		t.Fatalf("sessions after refusals: %+v, %v", page, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(e.home, "workspaces")); len(entries) != 1 {
		t.Fatalf("workspaces after refusals: %v", entries)
	}
	if branches := git(t, repo, "branch", "--format=%(refname:short)"); branches != "agent/other\nmain\ntaken" {
		t.Fatalf("branches after refusals: %q", branches)
	}
	if entries, _ := os.ReadDir(filepath.Join(repo, ".git", "worktrees")); len(entries) != 1 {
		t.Fatalf("worktrees after refusals: %v", entries)
	}
}

// plantTraps gives repo a config and tree that would make a git run by
// the daemon run programs: hooks (post-checkout, reference-transaction),
// core.fsmonitor, a filter driver's smudge and process commands named by
// .gitattributes. Each would leave a file in the returned directory.
func plantTraps(t *testing.T, repo string) string {
	t.Helper()
	marks := t.TempDir()
	mark := func(name string) string { return fmt.Sprintf("touch %s/%s", marks, name) }
	if err := os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("* filter=evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", ".gitattributes")
	git(t, repo, "commit", "-q", "-m", "attributes")
	for _, hook := range []string{"post-checkout", "reference-transaction", "pre-commit", "post-commit"} {
		p := filepath.Join(repo, ".git", "hooks", hook)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+mark(hook)+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git(t, repo, "config", "core.fsmonitor", mark("fsmonitor")+"; false")
	git(t, repo, "config", "filter.evil.smudge", mark("smudge")+"; cat")
	git(t, repo, "config", "filter.evil.clean", mark("clean")+"; cat")
	git(t, repo, "config", "filter.evil.process", mark("process"))
	git(t, repo, "config", "filter.evil.required", "true")
	git(t, repo, "config", "core.hooksPath", filepath.Join(repo, ".git", "hooks"))
	return marks
}

// A repository whose config and tree would make the daemon's git run
// programs (hooks, fsmonitor, a filter driver) gets its worktree made and
// removed with none of them run.
func TestWorktreeRunsNothingOfTheRepository(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	ctx := context.Background()
	repo := newRepo(t)
	marks := plantTraps(t, repo)
	// The traps are armed: a plain git run in the repository sets them off.
	probe := filepath.Join(t.TempDir(), "probe")
	if out, err := gitMay(repo, "worktree", "add", "-b", "probe", probe); err == nil {
		t.Logf("plain git worktree add: %s", out)
	}
	if entries, _ := os.ReadDir(marks); len(entries) == 0 {
		t.Fatal("the traps did not go off under a plain git: the test proves nothing")
	}
	if err := os.RemoveAll(marks); err != nil || os.Mkdir(marks, 0o755) != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(marks); len(entries) != 0 {
		t.Fatalf("marks left: %v", entries)
	}

	s := e.create(berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/x"}})
	if _, err := os.Stat(filepath.Join(s.Workspace, ".gitattributes")); err != nil {
		t.Fatalf("worktree not checked out: %v", err)
	}
	if err := e.m.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(marks); len(entries) != 0 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Fatalf("the daemon's git ran the repository's programs: %v", names)
	}
}

// A filter driver whose name git's command line could not override is
// refused rather than run.
func TestWorktreeFilterNameRefused(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	repo := newRepo(t)
	git(t, repo, "config", "filter.a=b.smudge", "touch /tmp/never")
	_, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo",
		Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "x"}})
	if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(berth.ErrorMessage(err), "filter") {
		t.Fatalf("create = %v", err)
	}
}

// bwrapEnv is a manager whose sessions run under bwrap; it skips where
// bwrap cannot make sandboxes.
func bwrapEnv(t *testing.T, tweak ...func(*Options)) *env {
	t.Helper()
	p := bwrapProvider(t)
	return newEnv(t, append([]func(*Options){func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Sandbox.Default = berth.SandboxBwrap
	}}, tweak...)...)
}

// bwrapProvider is a bwrap provider that works here, or skips.
func bwrapProvider(t *testing.T) *bwrap.Provider {
	t.Helper()
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	return p
}

// sh runs a shell command in the session's sandbox.
func (e *env) sh(id, script string) *berth.ExecResult {
	e.t.Helper()
	r, err := e.m.Exec(context.Background(), id, berth.ExecRequest{Command: []string{"/bin/sh", "-c", script}, TimeoutSeconds: 60})
	if err != nil {
		e.t.Fatalf("exec %q: %v", script, err)
	}
	return r
}

// Inside bwrap, git works in the worktree: a commit lands on the
// session's branch in the repository. What the sandbox may not write is
// refused: the repository's config and hooks, another branch, another
// worktree.
func TestWorktreeGitCommitsInsideBwrap(t *testing.T) {
	needGit(t)
	e := bwrapEnv(t)
	repo := newRepo(t)
	other := e.create(berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/other"}})
	s := e.create(berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/x"}})
	if s.Sandbox.Provider != berth.SandboxBwrap || s.State != berth.StateActive {
		t.Fatalf("session %s %s", s.Sandbox.Provider, s.State)
	}
	id := "-c user.name=agent -c user.email=agent@berth"
	r := e.sh(s.ID, "echo work > work.txt && git add work.txt && git "+id+" commit -q -m 'agent work' && git status --porcelain")
	if r.ExitCode != 0 {
		t.Fatalf("commit in bwrap: %d\n%s\n%s", r.ExitCode, r.Stdout, r.Stderr)
	}
	if msg := git(t, repo, "log", "-1", "--format=%s", "agent/x"); msg != "agent work" {
		t.Fatalf("branch agent/x: %q", msg)
	}
	if files := git(t, repo, "show", "--name-only", "--format=", "agent/x"); files != "work.txt" {
		t.Fatalf("commit files: %q", files)
	}
	main := git(t, repo, "rev-parse", "main")
	for what, script := range map[string]string{
		"the repository's config":  "git config core.hooksPath /tmp",
		"the repository's hooks":   "echo '#!/bin/sh' > " + filepath.Join(repo, ".git/hooks/post-checkout"),
		"a branch outside its dir": "git update-ref refs/heads/main HEAD",
		"a tag":                    "git tag v1",
		"the objects' alternates":  "echo /tmp > " + filepath.Join(repo, ".git/objects/info/alternates"),
		"another worktree's index": "echo x > " + filepath.Join(other.Worktree.GitDir, "index"),
	} {
		if r := e.sh(s.ID, script); r.ExitCode == 0 {
			t.Errorf("the sandbox wrote %s: %q succeeded", what, script)
		}
	}
	// The main working tree is not in the sandbox (a write there lands
	// in the sandbox's own /tmp, if anywhere).
	e.sh(s.ID, "echo x > "+filepath.Join(repo, "README"))
	if b, _ := os.ReadFile(filepath.Join(repo, "README")); string(b) != "hello\n" {
		t.Fatalf("the sandbox wrote the main working tree: %q", b)
	}
	if got := git(t, repo, "rev-parse", "main"); got != main {
		t.Fatalf("main moved to %s", got)
	}
	if cfg, _ := gitMay(repo, "config", "--get", "core.hooksPath"); cfg != "" {
		t.Fatalf("config changed: %q", cfg)
	}
}

// A fork (from_snapshot) of a worktree session has the files but not the
// .git file naming the other session's git directory: git in the fork
// can never write the other session's index. A worktree with
// from_snapshot is refused.
func TestForkOfAWorktreeSession(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	ctx := context.Background()
	repo := newRepo(t)
	s := e.create(berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/src"}})
	snap, err := e.m.CreateSnapshot(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	fork := e.create(berth.CreateRequest{FromSnapshot: snap.ID})
	if fork.Worktree != nil {
		t.Fatalf("the fork claims the worktree: %+v", fork.Worktree)
	}
	if b, err := os.ReadFile(filepath.Join(fork.Workspace, "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("fork README = %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(fork.Workspace, ".git")); !os.IsNotExist(err) {
		t.Fatalf("the fork kept the worktree's .git file: %v", err)
	}
	if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", FromSnapshot: snap.ID,
		Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/fork"}}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("worktree with from_snapshot: %v", err)
	}
	// Deleting the fork leaves the source's worktree.
	if err := e.m.DeleteSession(ctx, fork.ID); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(worktreeDirs(t, repo), s.Workspace) {
		t.Fatal("the fork's delete unregistered the source's worktree")
	}
}

// The daemon's own GIT_* variables never steer its git: with GIT_DIR
// naming a decoy repository and GIT_CONFIG_* turning hooks back on, the
// worktree is made in the repository asked for, and no hook runs.
func TestWorktreeGitIgnoresTheDaemonsGitEnvironment(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	repo, decoy := newRepo(t), newRepo(t)
	marks := plantTraps(t, repo)
	t.Setenv("GIT_DIR", filepath.Join(decoy, ".git"))
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
	t.Setenv("GIT_CONFIG_VALUE_0", filepath.Join(repo, ".git", "hooks"))
	s := e.create(berth.CreateRequest{Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/env"}})
	os.Unsetenv("GIT_DIR")
	os.Unsetenv("GIT_CONFIG_COUNT")
	if _, err := gitMay(repo, "rev-parse", "--verify", "refs/heads/agent/env"); err != nil {
		t.Fatal("the branch is not in the repository asked for")
	}
	if _, err := gitMay(decoy, "rev-parse", "--verify", "refs/heads/agent/env"); err == nil {
		t.Fatal("the daemon's GIT_DIR steered its git to the decoy")
	}
	if !strings.Contains(worktreeDirs(t, repo), s.Workspace) {
		t.Fatal("the worktree is not the repository's")
	}
	if entries, _ := os.ReadDir(marks); len(entries) != 0 {
		t.Fatalf("a hook ran: %v", entries)
	}
}

// A repository whose git directory lacks objects/info (or objects/pack)
// is refused: the sandbox is given objects/ writable with those two
// read-only on top, so a missing one would be the agent's to make, and
// an alternates file there would steer the daemon's own git.
func TestWorktreeRefusesARepositoryWithoutObjectsInfo(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	for _, sub := range []string{"info", "pack"} {
		repo := newRepo(t)
		if err := os.RemoveAll(filepath.Join(repo, ".git", "objects", sub)); err != nil {
			t.Fatal(err)
		}
		_, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo",
			Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/x"}})
		if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(berth.ErrorMessage(err), "objects/"+sub) {
			t.Errorf("a repository without objects/%s: %v", sub, err)
		}
	}
}
