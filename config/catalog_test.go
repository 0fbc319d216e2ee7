package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// builtinNames are the agents the catalog ships with.
var builtinNames = []string{"claude", "codex", "copilot", "cursor", "demo", "gemini", "goose", "kimi", "opencode", "qwen"}

func TestCatalogBuiltins(t *testing.T) {
	cat, err := Default().Catalog("/opt/berth/bin/berth")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range cat.List() {
		names = append(names, a.Name)
		if a.Description == "" || a.Command == "" {
			t.Errorf("%s: empty description or command: %+v", a.Name, a)
		}
	}
	if !slices.Equal(names, builtinNames) {
		t.Errorf("List names = %v, want %v (sorted)", names, builtinNames)
	}
	claude, ok := cat.Get("claude")
	if !ok || claude.Command != "npx" || !slices.Equal(claude.Args, []string{"-y", "@agentclientprotocol/claude-agent-acp"}) {
		t.Errorf("claude = %+v", claude)
	}
	if !claude.Network || !slices.Contains(claude.PassEnv, "ANTHROPIC_API_KEY") || !slices.Contains(claude.HomeFiles, ".claude.json") {
		t.Errorf("claude lacks network, pass_env or home_files: %+v", claude)
	}
	if g, _ := cat.Get("gemini"); g.Command != "gemini" || !slices.Equal(g.Args, []string{"--acp"}) {
		t.Errorf("gemini = %+v", g)
	}
	if _, ok := cat.Get("nope"); ok {
		t.Error("Get of an unknown agent succeeded")
	}
}

func TestCatalogDemoResolvesToSelf(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := Default().Catalog(self)
	if err != nil {
		t.Fatal(err)
	}
	demo, _ := cat.Get("demo")
	if demo.Command != self || !slices.Equal(demo.Args, []string{"agent-demo"}) {
		t.Errorf("demo = %+v, want command %q args [agent-demo]", demo, self)
	}
	if demo.Description != "berth's deterministic demo agent" || demo.Network {
		t.Errorf("demo = %+v", demo)
	}
	for _, a := range cat.List() {
		if a.Name == "demo" && !a.Available {
			t.Error("demo is not available though self is an executable")
		}
	}

	// Without self, "berth" stays a command looked up in PATH.
	cat, err = Default().Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	if demo, _ := cat.Get("demo"); demo.Command != "berth" {
		t.Errorf("demo command = %q, want berth", demo.Command)
	}
}

func TestCatalogOverrideByName(t *testing.T) {
	c := Default()
	c.Agents = []berth.AgentSpec{{
		Name:    "claude",
		Command: "/usr/local/bin/claude-acp",
		Env:     map[string]string{"DEBUG": "1"},
	}, {
		Name:        "codex",
		Args:        []string{},
		Description: "my codex",
	}}
	cat, err := c.Catalog("/x/berth")
	if err != nil {
		t.Fatal(err)
	}
	claude, _ := cat.Get("claude")
	if claude.Command != "/usr/local/bin/claude-acp" || claude.Env["DEBUG"] != "1" {
		t.Errorf("override not applied: %+v", claude)
	}
	// Fields the override leaves unset keep the built-in's values, but for
	// the args: they were the built-in command's, not this one's.
	if len(claude.Args) != 0 || !slices.Contains(claude.PassEnv, "CLAUDE_CODE_OAUTH_TOKEN") || !claude.Network ||
		claude.Description == "" {
		t.Errorf("override lost built-in fields: %+v", claude)
	}
	codex, _ := cat.Get("codex")
	if codex.Command != "npx" || len(codex.Args) != 0 || codex.Description != "my codex" {
		t.Errorf("codex = %+v, want npx with no args", codex)
	}
	// Claude's own modes that decide permissions by themselves are built
	// in, and an override may name others.
	if !slices.Equal(claude.SelfDecidingModes, []string{"auto", "acceptEdits", "bypassPermissions"}) || claude.AskingMode != "default" {
		t.Errorf("claude's modes = %v, asking %q", claude.SelfDecidingModes, claude.AskingMode)
	}
	c.Agents = []berth.AgentSpec{{Name: "claude", SelfDecidingModes: []string{"yolo"}, AskingMode: "careful"}}
	if cat, err = c.Catalog(""); err != nil {
		t.Fatal(err)
	}
	if claude, _ = cat.Get("claude"); !slices.Equal(claude.SelfDecidingModes, []string{"yolo"}) || claude.AskingMode != "careful" {
		t.Errorf("claude's overridden modes = %v, asking %q", claude.SelfDecidingModes, claude.AskingMode)
	}
}

func TestCatalogFromFile(t *testing.T) {
	p := writeFile(t, `
[[agents]]
name = "gemini"
pass_env = ["ONLY_THIS"]

[[agents]]
name = "mine"
command = "my-agent"
args = ["--acp"]
description = "my own agent"
docker_image = "me/agent:1"
home_files = [".mine/"]
network = true
env = { LOG = "debug" }
`)
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := c.Catalog("/x/berth")
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := cat.Get("gemini"); !slices.Equal(g.PassEnv, []string{"ONLY_THIS"}) || g.Command != "gemini" {
		t.Errorf("gemini = %+v", g)
	}
	mine, ok := cat.Get("mine")
	want := berth.AgentSpec{Name: "mine", Command: "my-agent", Args: []string{"--acp"}, Description: "my own agent",
		DockerImage: "me/agent:1", HomeFiles: []string{".mine/"}, Network: true, Env: map[string]string{"LOG": "debug"}}
	if !ok || mine.Command != want.Command || !slices.Equal(mine.Args, want.Args) || mine.Description != want.Description ||
		mine.DockerImage != want.DockerImage || !slices.Equal(mine.HomeFiles, want.HomeFiles) || !mine.Network ||
		mine.Env["LOG"] != "debug" {
		t.Errorf("mine = %+v, want %+v", mine, want)
	}
	if n := len(cat.List()); n != len(builtinNames)+1 {
		t.Errorf("List has %d agents, want %d", n, len(builtinNames)+1)
	}
}

func TestCatalogInvalidEntries(t *testing.T) {
	cases := []struct {
		entries []berth.AgentSpec
		want    []string
	}{
		{[]berth.AgentSpec{{Name: "ok", Command: "x"}, {Command: "y"}}, []string{"agents[1]", "name is required"}},
		{[]berth.AgentSpec{{Name: "new"}}, []string{"agents[0]", "command is required"}},
		{[]berth.AgentSpec{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}, []string{"agents[1]", "twice"}},
		{[]berth.AgentSpec{{Name: "a/b", Command: "x"}}, []string{"agents[0]", "name"}},
		{[]berth.AgentSpec{{Name: "a", Command: "x", PassEnv: []string{"A=B"}}}, []string{"agents[0]", "pass_env"}},
		{[]berth.AgentSpec{{Name: "a", Command: "x", Env: map[string]string{"": "v"}}}, []string{"agents[0]", "env"}},
		{[]berth.AgentSpec{{Name: "codex", ModelEnv: map[string]string{"A-B": "{url}"}}}, []string{"agents[0]", "model_env"}},
		{[]berth.AgentSpec{{Name: "a", Command: "x", HomeFiles: []string{"../etc/passwd"}}}, []string{"agents[0]", "home_files"}},
		{[]berth.AgentSpec{{Name: "a", Command: "x", HomeFiles: []string{"/etc/passwd"}}}, []string{"agents[0]", "home_files"}},
		{[]berth.AgentSpec{{Name: "a", Command: "x", HomeFiles: []string{"."}}}, []string{"agents[0]", "home_files"}},
		{[]berth.AgentSpec{{Name: "a", Command: "x", SelfDecidingModes: []string{"yolo"}}}, []string{"agents[0]", "asking_mode"}},
		{[]berth.AgentSpec{{Name: "a", Command: "x", SelfDecidingModes: []string{"yolo"}, AskingMode: "yolo"}}, []string{"agents[0]", "asking_mode"}},
		// The built-in's asking mode may not become one of the override's.
		{[]berth.AgentSpec{{Name: "claude", SelfDecidingModes: []string{"default"}}}, []string{"agents[0]", "asking_mode"}},
	}
	for _, tc := range cases {
		c := Default()
		c.Agents = tc.entries
		_, err := c.Catalog("/x/berth")
		wantInvalid(t, err, tc.want...)
		// Load refuses the same entries up front.
		wantInvalid(t, c.Validate(), tc.want...)
	}
	// An override of a built-in needs no command.
	c := Default()
	c.Agents = []berth.AgentSpec{{Name: "kimi", Description: "d"}}
	if _, err := c.Catalog(""); err != nil {
		t.Errorf("override without command refused: %v", err)
	}
}

func TestCatalogAvailability(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "agent")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Default()
	c.Agents = []berth.AgentSpec{
		{Name: "missing", Command: "berth-no-such-command-" + strings.Repeat("x", 8)},
		{Name: "missing-path", Command: filepath.Join(dir, "absent")},
		{Name: "not-executable", Command: plain},
		{Name: "by-path", Command: exe},
		{Name: "in-path", Command: "sh"},
	}
	cat, err := c.Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"missing": false, "missing-path": false, "not-executable": false, "by-path": true, "in-path": true}
	for _, a := range cat.List() {
		if w, ok := want[a.Name]; ok && a.Available != w {
			t.Errorf("%s: available = %v, want %v", a.Name, a.Available, w)
		}
	}
}

// An npx agent names its package, and whether npx would fetch it from the
// registry at the first session (not installed, not in npx's cache).
func TestCatalogSaysWhenNpxFetches(t *testing.T) {
	bin, home := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "npx"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("HOME", home)
	t.Setenv("NPM_CONFIG_PREFIX", filepath.Join(home, "prefix"))
	claude := func() berth.AgentInfo {
		cat, err := Default().Catalog("")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range cat.List() {
			if a.Name == "claude" {
				return a
			}
		}
		t.Fatal("no claude in the catalog")
		return berth.AgentInfo{}
	}
	a := claude()
	if !a.Available || a.Package != "@agentclientprotocol/claude-agent-acp" || !a.Fetch ||
		!slices.Equal(a.Args, []string{"-y", "@agentclientprotocol/claude-agent-acp"}) {
		t.Fatalf("before the package is anywhere: %+v", a)
	}
	for _, dir := range []string{"prefix/lib/node_modules", ".npm/_npx/0123abcd/node_modules"} {
		pkg := filepath.Join(home, dir, "@agentclientprotocol/claude-agent-acp")
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if a := claude(); a.Fetch {
			t.Errorf("with the package in %s: %+v", dir, a)
		}
		if err := os.RemoveAll(filepath.Join(home, strings.Split(dir, "/")[0])); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCatalogGetReturnsCopy(t *testing.T) {
	cat, err := Default().Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cat.Get("claude")
	a.Args[0] = "changed"
	a.PassEnv = append(a.PassEnv[:0], "X")
	b, _ := cat.Get("claude")
	if b.Args[0] != "-y" || b.PassEnv[0] != "ANTHROPIC_API_KEY" {
		t.Errorf("changing a Get result changed the catalog: %+v", b)
	}
}

// A package installed globally under the system's prefix is not where npx
// looks once the environment names another prefix (a developer's global
// install must not fool a test, nor a daemon run with its own prefix).
func TestNpmGlobalPrefixIsTheEnvironments(t *testing.T) {
	system := t.TempDir()
	pkg := filepath.Join(system, "@agentclientprotocol/claude-agent-acp")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := systemNpmGlobal
	systemNpmGlobal = []string{system}
	t.Cleanup(func() { systemNpmGlobal = old })
	t.Setenv("HOME", t.TempDir())
	t.Setenv("npm_config_prefix", "")
	t.Setenv("NPM_CONFIG_PREFIX", "")
	if !npmHas("@agentclientprotocol/claude-agent-acp@1.0") {
		t.Fatal("no prefix set: the system's global install is not seen")
	}
	t.Setenv("NPM_CONFIG_PREFIX", t.TempDir())
	if npmHas("@agentclientprotocol/claude-agent-acp") {
		t.Fatal("with NPM_CONFIG_PREFIX elsewhere, the system's global install was taken")
	}
}

// List says the model API each agent calls, as the web UI's New session
// form needs to name the credential it lacks; an override's "none" shows
// as none at all.
func TestCatalogListShowsTheModelAPI(t *testing.T) {
	c := Default()
	c.Agents = []berth.AgentSpec{{Name: "codex", ModelAPI: berth.ModelAPINone}}
	cat, err := c.Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range cat.List() {
		got[a.Name] = a.ModelAPI
	}
	if got["claude"] != "anthropic" || got["gemini"] != "gemini" || got["demo"] != "" || got["codex"] != "" {
		t.Fatalf("model_api by agent = %v", got)
	}
}

// Codex and OpenCode read their endpoint from their own configuration:
// the built-ins carry the variables that point it at the gateway
// (model_env), which an [[agents]] entry replaces as a whole, and a Get's
// copy cannot change.
func TestCatalogModelEnv(t *testing.T) {
	p := writeFile(t, `
[[agents]]
name = "opencode"
model_env = { OPENCODE_CONFIG_CONTENT = '{"provider":{"mine":{"options":{"baseURL":"{url}"}}}}' }
`)
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := c.Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	codex, _ := cat.Get("codex")
	if !strings.Contains(codex.ModelEnv["CODEX_CONFIG"], `"base_url":"{url}"`) || codex.ModelEnv["MODEL_PROVIDER"] == "" {
		t.Errorf("codex's model_env = %v", codex.ModelEnv)
	}
	oc, _ := cat.Get("opencode")
	if len(oc.ModelEnv) != 1 || oc.ModelEnv["OPENCODE_CONFIG_CONTENT"] != `{"provider":{"mine":{"options":{"baseURL":"{url}"}}}}` {
		t.Errorf("opencode's model_env = %v, want the entry's", oc.ModelEnv)
	}
	codex.ModelEnv["MODEL_PROVIDER"] = "changed"
	if again, _ := cat.Get("codex"); again.ModelEnv["MODEL_PROVIDER"] != "berth" {
		t.Errorf("changing a Get result changed the catalog: %v", again.ModelEnv)
	}
}
