package session

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// installNpmAgent installs testdata/npmagent (a few lines of ACP in node,
// and a dependency npm hoists beside it) with npm into a fresh prefix
// outside /usr and /opt, as a user does, offline; it returns the path of
// the command npm made.
func installNpmAgent(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "%s is not installed (Debian packages nodejs npm)", tool)
		}
	}
	prefix := t.TempDir()
	cmd := exec.Command("npm", "install", "--offline", "--no-audit", "--no-fund", "--install-links",
		"--prefix", prefix, "./testdata/npmagent/dep", "./testdata/npmagent/agent")
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(prefix, ".npm-cache"), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install: %v\n%s", err, out)
	}
	return filepath.Join(prefix, "node_modules", ".bin", "berth-test-npm-agent")
}

// A node agent installed by `npm install --prefix` runs whole turns under
// bwrap: its package (its own modules, the dependency npm hoisted) is
// visible read-only, where only its program file was before (node died
// with ERR_MODULE_NOT_FOUND), and so is its interpreter, found by
// `#!/usr/bin/env node` in a PATH outside the system directories (nvm); its home_files directory is a private copy
// it writes (EROFS before), and the user's files stay as they were; the
// package cannot be written from inside.
func TestNpmInstalledAgentBwrap(t *testing.T) {
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	command := installNpmAgent(t)
	user := t.TempDir()
	testenv.WriteFile(t, filepath.Join(user, ".tiny/auth.json"), "user-token", 0o600)
	// node only where nvm would put it: outside the system directories,
	// the one directory of the agent's PATH.
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	nvm := filepath.Join(t.TempDir(), "versions", "node", "bin")
	testenv.Symlink(t, node, filepath.Join(nvm, "node"))
	// A directory's copy leaves token files out: the agent's is named.
	agent := berth.AgentSpec{Name: "npm-agent", Command: command, HomeFiles: []string{".tiny/", ".tiny/auth.json"},
		Env: map[string]string{"PATH": nvm}}
	e := newEnv(t, withAgents(agent), func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Sandbox.Default = berth.SandboxBwrap
		o.UserHome = user
	})
	s := e.create(berth.CreateRequest{Agent: "npm-agent"})
	got, err := e.m.GetSession(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != berth.StateActive {
		t.Fatalf("state %s (%s), failure %+v; stderr: %s", got.State, got.StopReason, got.Failure, stderrOf(e, s.ID))
	}
	res := e.prompt(s.ID, "hello")
	if res.StopReason != "end_turn" || !strings.Contains(res.Text, "hello from a hoisted dependency; token user-token; state {\"started\":true}") {
		t.Fatalf("turn %+v; stderr: %s", res, stderrOf(e, s.ID))
	}
	if b, _ := os.ReadFile(filepath.Join(user, ".tiny/auth.json")); string(b) != "user-token" {
		t.Errorf("the user's home file = %q", b)
	}
	if _, err := os.Stat(filepath.Join(user, ".tiny/state.json")); !os.IsNotExist(err) {
		t.Errorf("the agent's write reached the user's home: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.m.place.homeDir(s.ID), ".tiny/auth.json")); string(b) != "rewritten by the agent" {
		t.Errorf("the session's copy = %q", b)
	}
	// The package is bound read-only, and nothing of the prefix around its
	// node_modules, nor of the user's home, is there.
	prefix := filepath.Dir(filepath.Dir(filepath.Dir(command)))
	testenv.WriteFile(t, filepath.Join(prefix, "secret.txt"), "prefix secret", 0o644)
	out, err := e.m.Exec(context.Background(), s.ID, berth.ExecRequest{Command: []string{"/bin/sh", "-c",
		"echo x >> " + command + " && echo WROTE; /bin/cat " + filepath.Join(prefix, "node_modules/berth-test-npm-dep/index.js") +
			" " + filepath.Join(prefix, "secret.txt") + " " + filepath.Join(user, ".tiny/auth.json")}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.Stdout, "WROTE") || !strings.Contains(out.Stdout, "greeting") ||
		strings.Contains(out.Stdout, "prefix secret") || strings.Contains(out.Stdout, "user-token") {
		t.Errorf("inside: %+v", out)
	}
}

// stderrOf is what a session's agent wrote to stderr, from its log.
func stderrOf(e *env, id string) string {
	var b strings.Builder
	for _, ev := range ofType(e.events(id), berth.EventAgentStderr) {
		b.Write(ev.Data)
	}
	return b.String()
}
