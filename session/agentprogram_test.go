package session

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berth-sh/berth"
)

// writeTestFile writes content at p, making its parents.
func writeTestFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// symlink makes the link at p to target, making p's parents.
func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// The layouts npm leaves, as a user gets them: a program in a node_modules
// tree runs from its real path with its package bound (and a project's
// whole node_modules, where npm hoists the dependencies), its interpreter
// found in PATH outside the system directories is bound where PATH finds
// it; a bare name is looked up in PATH (not under docker); a system program
// binds nothing; and neither the root nor the user's home is ever bound.
func TestAgentProgramResolvesNpmInstalls(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A node outside the system directories, as nvm installs it.
	nodeReal := filepath.Join(dir, "nvm/versions/node/v22/bin/node")
	writeTestFile(t, nodeReal, "\x7fELF", 0o755)
	nodeBin := filepath.Join(dir, "bin")
	symlink(t, nodeReal, filepath.Join(nodeBin, "node"))
	path := nodeBin + ":/usr/bin:/bin"

	// npm install --prefix P @acme/agent: a project, hoisted dependencies.
	local := filepath.Join(dir, "local")
	writeTestFile(t, filepath.Join(local, "package.json"), "{}", 0o644)
	script := filepath.Join(local, "node_modules/@acme/agent/dist/index.js")
	writeTestFile(t, script, "#!/usr/bin/env -S node --no-warnings\n", 0o755)
	symlink(t, "../@acme/agent/dist/index.js", filepath.Join(local, "node_modules/.bin/agent"))
	got := resolveAgentProgram(filepath.Join(local, "node_modules/.bin/agent"), path, true, "/home/u")
	want := agentProgram{path: script, binds: []berth.Bind{
		{Source: filepath.Join(local, "node_modules/@acme/agent"), Target: filepath.Join(local, "node_modules/@acme/agent")},
		{Source: filepath.Join(local, "node_modules"), Target: filepath.Join(local, "node_modules")},
		{Source: nodeReal, Target: filepath.Join(nodeBin, "node")}}}
	checkProgram(t, "local install", got, want)

	// npm install -g --prefix G agent, run by its bare name from PATH:
	// the package alone (its dependencies are inside it).
	global := filepath.Join(dir, "global")
	gscript := filepath.Join(global, "lib/node_modules/agent/cli.js")
	writeTestFile(t, gscript, "#!/usr/bin/env node\n", 0o755)
	symlink(t, "../lib/node_modules/agent/cli.js", filepath.Join(global, "bin/agent"))
	got = resolveAgentProgram("agent", filepath.Join(global, "bin")+":"+path, true, "/home/u")
	want = agentProgram{path: gscript, binds: []berth.Bind{
		{Source: filepath.Join(global, "lib/node_modules/agent"), Target: filepath.Join(global, "lib/node_modules/agent")},
		{Source: nodeReal, Target: filepath.Join(nodeBin, "node")}}}
	checkProgram(t, "global install by name", got, want)
	// Under docker a bare name is the image's.
	checkProgram(t, "docker", resolveAgentProgram("agent", filepath.Join(global, "bin"), false, ""), agentProgram{path: "agent"})

	// A binary outside node_modules: the file alone, at the path given.
	bin := filepath.Join(dir, "go/bin/agent")
	writeTestFile(t, bin, "\x7fELF", 0o755)
	checkProgram(t, "binary", resolveAgentProgram(bin, path, true, ""),
		agentProgram{path: bin, binds: []berth.Bind{{Source: bin, Target: bin}}})
	checkProgram(t, "system", resolveAgentProgram("/usr/bin/gemini", path, true, ""), agentProgram{path: "/usr/bin/gemini"})
	checkProgram(t, "missing", resolveAgentProgram("nope", path, true, ""), agentProgram{path: "nope"})

	// A project whose node_modules holds the user's home (or is it):
	// only the package is bound, never a directory above the home.
	got = resolveAgentProgram(filepath.Join(local, "node_modules/.bin/agent"), path, true, filepath.Join(local, "node_modules"))
	if slices.ContainsFunc(got.binds, func(b berth.Bind) bool { return b.Source == filepath.Join(local, "node_modules") }) {
		t.Errorf("the user's home is bound: %+v", got.binds)
	}
	for _, d := range []string{"/", "/usr/lib/node_modules", "/home/u", "/home"} {
		if safeToBind(d, "/home/u") {
			t.Errorf("safeToBind(%q) = true", d)
		}
	}
	if !safeToBind("/home/u/.npm-global/lib/node_modules/agent", "/home/u") {
		t.Error("a package in the home may not be bound")
	}
}

// A session's env may set the agent's PATH inside, but which host files
// are bound is the catalog's and the daemon's to say: a bare name is not
// looked up in the session's PATH.
func TestAgentProgramIgnoresTheSessionsPath(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "node_modules/secret/agent"), "\x7fELF", 0o755)
	m := New(Options{Providers: []berth.SandboxProvider{capsProviders()[berth.SandboxBwrap]}})
	spec := berth.AgentSpec{Name: "a", Command: "agent"}
	s := &berth.Session{ID: "ses_x", Sandbox: berth.SandboxSpec{Provider: berth.SandboxBwrap},
		Env: map[string]string{"PATH": filepath.Join(dir, "node_modules/secret")}}
	if p := m.place.agentProgram(s, spec); p.path != "agent" || len(p.binds) != 0 {
		t.Fatalf("resolved from the session's PATH: %+v", p)
	}
	spec.Env = map[string]string{"PATH": filepath.Join(dir, "node_modules/secret")}
	if p := m.place.agentProgram(s, spec); len(p.binds) != 1 || p.binds[0].Source != filepath.Join(dir, "node_modules/secret") {
		t.Fatalf("not resolved from the catalog's PATH: %+v", p)
	}
}

// checkProgram compares a resolved program with the one wanted.
func checkProgram(t *testing.T, what string, got, want agentProgram) {
	t.Helper()
	if got.path != want.path || !slices.Equal(got.binds, want.binds) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}
