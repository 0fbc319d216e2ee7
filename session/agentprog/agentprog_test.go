package agentprog

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

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
	testenv.WriteFile(t, nodeReal, "\x7fELF", 0o755)
	nodeBin := filepath.Join(dir, "bin")
	testenv.Symlink(t, nodeReal, filepath.Join(nodeBin, "node"))
	path := nodeBin + ":/usr/bin:/bin"

	// npm install --prefix P @acme/agent: a project, hoisted dependencies.
	local := filepath.Join(dir, "local")
	testenv.WriteFile(t, filepath.Join(local, "package.json"), "{}", 0o644)
	script := filepath.Join(local, "node_modules/@acme/agent/dist/index.js")
	testenv.WriteFile(t, script, "#!/usr/bin/env -S node --no-warnings\n", 0o755)
	testenv.Symlink(t, "../@acme/agent/dist/index.js", filepath.Join(local, "node_modules/.bin/agent"))
	got := Resolve(filepath.Join(local, "node_modules/.bin/agent"), path, true, "/home/u")
	want := Program{Path: script, Binds: []berth.Bind{
		{Source: filepath.Join(local, "node_modules/@acme/agent"), Target: filepath.Join(local, "node_modules/@acme/agent")},
		{Source: filepath.Join(local, "node_modules"), Target: filepath.Join(local, "node_modules")},
		{Source: nodeReal, Target: filepath.Join(nodeBin, "node")}}}
	checkProgram(t, "local install", got, want)

	// npm install -g --prefix G agent, run by its bare name from PATH:
	// the package alone (its dependencies are inside it).
	global := filepath.Join(dir, "global")
	gscript := filepath.Join(global, "lib/node_modules/agent/cli.js")
	testenv.WriteFile(t, gscript, "#!/usr/bin/env node\n", 0o755)
	testenv.Symlink(t, "../lib/node_modules/agent/cli.js", filepath.Join(global, "bin/agent"))
	got = Resolve("agent", filepath.Join(global, "bin")+":"+path, true, "/home/u")
	want = Program{Path: gscript, Binds: []berth.Bind{
		{Source: filepath.Join(global, "lib/node_modules/agent"), Target: filepath.Join(global, "lib/node_modules/agent")},
		{Source: nodeReal, Target: filepath.Join(nodeBin, "node")}}}
	checkProgram(t, "global install by name", got, want)
	// Under docker a bare name is the image's.
	checkProgram(t, "docker", Resolve("agent", filepath.Join(global, "bin"), false, ""), Program{Path: "agent"})

	// A binary outside node_modules: the file alone, at the path given.
	bin := filepath.Join(dir, "go/bin/agent")
	testenv.WriteFile(t, bin, "\x7fELF", 0o755)
	checkProgram(t, "binary", Resolve(bin, path, true, ""),
		Program{Path: bin, Binds: []berth.Bind{{Source: bin, Target: bin}}})
	checkProgram(t, "system", Resolve("/usr/bin/gemini", path, true, ""), Program{Path: "/usr/bin/gemini"})
	checkProgram(t, "missing", Resolve("nope", path, true, ""), Program{Path: "nope"})

	// A project whose node_modules holds the user's home (or is it):
	// only the package is bound, never a directory above the home.
	got = Resolve(filepath.Join(local, "node_modules/.bin/agent"), path, true, filepath.Join(local, "node_modules"))
	if slices.ContainsFunc(got.Binds, func(b berth.Bind) bool { return b.Source == filepath.Join(local, "node_modules") }) {
		t.Errorf("the user's home is bound: %+v", got.Binds)
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
// checkProgram compares a resolved program with the one wanted.
func checkProgram(t *testing.T, what string, got, want Program) {
	t.Helper()
	if got.Path != want.Path || !slices.Equal(got.Binds, want.Binds) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}
