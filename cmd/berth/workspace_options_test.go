package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// Through the daemon, on bwrap and docker: a session made as a worktree,
// with files and a mount of [[sandbox.mounts]], has its agent read the
// files, read the mount (read-only) and, where the sandbox has git (bwrap:
// the host's /usr), commit on its branch; after a stop and a resume the
// mount is there again; delete removes the worktree and keeps the branch.
func TestWorkspaceOptionsOnIsolatingProviders(t *testing.T) {
	repo := gitRepo(t, filepath.Join(t.TempDir(), "repo"))
	home := t.TempDir()
	cache := t.TempDir()
	if err := os.WriteFile(filepath.Join(cache, "pkg.txt"), []byte("cached-pkg"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, home, fmt.Sprintf("[[sandbox.mounts]]\nname = \"pkgs\"\nhost = %q\ntarget = \"/cache/pkgs\"\n", cache))
	s := startServerEnv(t, home, providerEnv())
	for _, provider := range []string{berth.SandboxBwrap, berth.SandboxDocker} {
		t.Run(provider, func(t *testing.T) {
			s.needSandbox(t, provider)
			branch := "agent/" + provider
			var sess berth.Session
			body := map[string]any{"agent": "demo", "sandbox": provider, "mounts": []string{"pkgs"},
				"worktree": map[string]string{"repo": repo, "branch": branch},
				"files":    map[string]string{"task/brief.md": "the brief"}}
			if st, err := s.api("POST", "/v1/sessions", body, &sess); st != 201 || sess.State != berth.StateActive {
				t.Fatalf("create = %d %v %+v (%v)\n%s", st, err, sess.State, sess.Failure, s.log)
			}
			if sess.Worktree == nil || sess.Worktree.Branch != branch || len(sess.Mounts) != 1 {
				t.Fatalf("session worktree %+v mounts %v", sess.Worktree, sess.Mounts)
			}
			path := "/v1/sessions/" + sess.ID
			turn := func(text string) berth.TurnResult { t.Helper(); return s.turn(t, sess.ID, text) }
			if r := turn("read task/brief.md"); r.Text != "the brief" {
				t.Fatalf("read the file: %+v", r)
			}
			mount := func(when string) {
				t.Helper()
				if r := turn("run cat /cache/pkgs/pkg.txt"); !strings.Contains(r.Text, "cached-pkg") {
					t.Fatalf("%s: read the mount: %+v", when, r)
				}
				turn("run touch /cache/pkgs/written")
				if _, err := os.Stat(filepath.Join(cache, "written")); !os.IsNotExist(err) {
					t.Fatalf("%s: the sandbox wrote the mount: %v", when, err)
				}
			}
			mount("after create")
			if provider == berth.SandboxBwrap {
				turn("run git add task && git -c user.name=a -c user.email=a@a commit -q -m from-the-agent")
				if msg := git(t, repo, "log", "-1", "--format=%s", branch); msg != "from-the-agent" {
					t.Fatalf("branch %s: %q", branch, msg)
				}
			}
			if st, _ := s.api("POST", path+"/stop", nil, nil); st != 200 {
				t.Fatalf("stop = %d", st)
			}
			if st, _ := s.api("POST", path+"/resume", nil, nil); st != 200 {
				t.Fatalf("resume = %d", st)
			}
			mount("after resume")
			if st, _ := s.api("DELETE", path, nil, nil); st != 204 {
				t.Fatalf("delete = %d", st)
			}
			if _, err := os.Stat(sess.Workspace); !os.IsNotExist(err) {
				t.Fatalf("worktree left: %v", err)
			}
			if strings.Contains(git(t, repo, "worktree", "list"), sess.Workspace) {
				t.Fatal("worktree still registered")
			}
			git(t, repo, "rev-parse", "--verify", "refs/heads/"+branch)
		})
	}
}
