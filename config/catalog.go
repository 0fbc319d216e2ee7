package config

import (
	"cmp"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway"
)

// selfCommand is the command that means "this berth binary" in a catalog
// entry: it resolves to the running executable.
const selfCommand = "berth"

// builtinAgents is the catalog before [[agents]] entries are applied. A
// home_files entry ending in "/" is a directory. Network is true for agents
// that must reach a model API to do anything.
var builtinAgents = []berth.AgentSpec{
	{
		Name:        "demo",
		Command:     selfCommand,
		Args:        []string{"agent-demo"},
		Description: "berth's deterministic demo agent",
	},
	{
		Name:        "claude",
		Command:     "npx",
		Args:        []string{"-y", "@agentclientprotocol/claude-agent-acp"},
		Description: "Claude Code (Anthropic) through its ACP adapter",
		PassEnv:     []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN"},
		HomeFiles:   []string{".claude.json"},
		Network:     true,
		ModelAPI:    "anthropic",
		// Its modes that answer permissions by themselves; it starts in
		// auto unless ~/.claude/settings.json says otherwise.
		SelfDecidingModes: []string{"auto", "acceptEdits", "bypassPermissions"},
		AskingMode:        "default",
	},
	{
		Name:        "codex",
		Command:     "npx",
		Args:        []string{"-y", "@agentclientprotocol/codex-acp"},
		Description: "Codex (OpenAI) through its ACP adapter",
		PassEnv:     []string{"OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL"},
		HomeFiles:   []string{".codex/config.toml"},
		Network:     true,
		ModelAPI:    "openai",
		// Codex takes its endpoint from a model provider, not from
		// OPENAI_BASE_URL: the adapter starts codex with the provider
		// MODEL_PROVIDER names, defined in CODEX_CONFIG, over what the
		// user's config.toml says.
		ModelEnv: map[string]string{
			"MODEL_PROVIDER": "berth",
			"CODEX_CONFIG":   `{"model_providers":{"berth":{"name":"berth (model gateway)","base_url":"{url}","wire_api":"responses","env_key":"OPENAI_API_KEY"}}}`,
		},
		// Its modes that edit without asking; it starts in agent.
		SelfDecidingModes: []string{"workspace-write", "agent", "agent-full-access"},
		AskingMode:        "read-only",
	},
	{
		Name:        "gemini",
		Command:     "gemini",
		Args:        []string{"--acp"},
		Description: "Gemini CLI (Google)",
		PassEnv: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT",
			"GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_APPLICATION_CREDENTIALS"},
		HomeFiles: []string{".gemini/"},
		Network:   true,
		ModelAPI:  "gemini",
		// Its modes that answer permissions by themselves.
		SelfDecidingModes: []string{"autoEdit", "yolo"},
		AskingMode:        "default",
	},
	{
		Name:        "opencode",
		Command:     "opencode",
		Args:        []string{"acp"},
		Description: "OpenCode (sst)",
		PassEnv:     []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"},
		HomeFiles:   []string{".config/opencode/"},
		// It edits and runs commands without asking unless its permission
		// config says ask (merged over the user's opencode.json).
		Env:      map[string]string{"OPENCODE_PERMISSION": `{"edit":"ask","bash":"ask","webfetch":"ask"}`},
		Network:  true,
		ModelAPI: "openai",
		// OpenCode takes its endpoint from its config, which this merges
		// over the user's: its openai provider at the gateway, and no
		// other (its own opencode/… models would not go through it).
		ModelEnv: map[string]string{
			"OPENCODE_CONFIG_CONTENT": `{"enabled_providers":["openai"],"provider":{"openai":{"options":{"baseURL":"{url}","apiKey":"{key}"}}}}`,
		},
	},
	{
		Name:        "qwen",
		Command:     "qwen",
		Args:        []string{"--acp"},
		Description: "Qwen Code (Alibaba)",
		PassEnv:     []string{"DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"},
		HomeFiles:   []string{".qwen/"},
		Network:     true,
		ModelAPI:    "openai",
		// Its modes that answer permissions by themselves; it starts in auto.
		SelfDecidingModes: []string{"auto-edit", "auto", "yolo"},
		AskingMode:        "default",
	},
	{
		Name:        "goose",
		Command:     "goose",
		Args:        []string{"acp"},
		Description: "Goose (Block)",
		PassEnv:     []string{"GOOSE_PROVIDER", "GOOSE_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"},
		HomeFiles:   []string{".config/goose/"},
		Network:     true,
	},
	{
		Name:        "copilot",
		Command:     "copilot",
		Args:        []string{"--acp", "--stdio"},
		Description: "GitHub Copilot CLI",
		PassEnv:     []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"},
		HomeFiles:   []string{".copilot/"},
		Network:     true,
	},
	{
		Name:        "cursor",
		Command:     "cursor-agent",
		Args:        []string{"acp"},
		Description: "Cursor CLI agent",
		PassEnv:     []string{"CURSOR_API_KEY"},
		HomeFiles:   []string{".cursor/cli-config.json", ".config/cursor/"},
		Network:     true,
	},
	{
		Name:        "kimi",
		Command:     "kimi",
		Args:        []string{"acp"},
		Description: "Kimi CLI (Moonshot AI)",
		PassEnv:     []string{"KIMI_API_KEY", "MOONSHOT_API_KEY"},
		HomeFiles:   []string{".kimi/"},
		Network:     true,
	},
}

// agentName is what an agent may be called: it appears in URLs and labels.
var agentName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// envName is a portable environment variable name.
var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// Catalog is the set of agents sessions can run, by name. It is immutable
// once built and safe for concurrent use.
type Catalog struct {
	agents map[string]berth.AgentSpec
	// packages is the daemon's npm prefix of agents' packages
	// (WithPackages), "" for none; installMu serialises installs into it.
	packages  string
	installMu sync.Mutex
}

// Catalog builds the agent catalog: the built-in agents, then the
// [[agents]] entries, each overriding the built-in of the same name field by
// field (command — which also drops the built-in's args —, args, env, description, docker_image, pass_env, home_files,
// model_api, model_env, self_deciding_modes, asking_mode where set; network = true grants network, false keeps the built-in's) or
// adding a new agent. self is the path of the running berth binary
// (os.Executable()): every entry whose command is "berth" runs self; "" keeps
// "berth" as a command to look up in PATH.
func (c *Config) Catalog(self string) (*Catalog, error) {
	if err := validateAgents(c.Agents); err != nil {
		return nil, err
	}
	agents := make(map[string]berth.AgentSpec, len(builtinAgents)+len(c.Agents))
	for _, a := range builtinAgents {
		agents[a.Name] = cloneSpec(a)
	}
	for _, o := range c.Agents {
		a, ok := agents[o.Name]
		if !ok {
			agents[o.Name] = cloneSpec(o)
			continue
		}
		agents[o.Name] = merge(a, o)
	}
	if self != "" {
		for name, a := range agents {
			if a.Command == selfCommand {
				a.Command = self
				agents[name] = a
			}
		}
	}
	return &Catalog{agents: agents}, nil
}

// merge returns base with the fields set in o replacing base's.
func merge(base, o berth.AgentSpec) berth.AgentSpec {
	if o.Command != "" && o.Command != base.Command {
		base.Command = o.Command
		// The built-in's args belong to its command: another command
		// runs with the override's args, or none.
		base.Args = nil
	}
	if o.Args != nil {
		base.Args = slices.Clone(o.Args)
	}
	if o.Env != nil {
		base.Env = maps.Clone(o.Env)
	}
	if o.Description != "" {
		base.Description = o.Description
	}
	if o.DockerImage != "" {
		base.DockerImage = o.DockerImage
	}
	if o.PassEnv != nil {
		base.PassEnv = slices.Clone(o.PassEnv)
	}
	if o.HomeFiles != nil {
		base.HomeFiles = slices.Clone(o.HomeFiles)
	}
	if o.ModelAPI != "" {
		base.ModelAPI = o.ModelAPI
	}
	if o.ModelEnv != nil {
		base.ModelEnv = maps.Clone(o.ModelEnv)
	}
	if o.SelfDecidingModes != nil {
		base.SelfDecidingModes = slices.Clone(o.SelfDecidingModes)
	}
	if o.AskingMode != "" {
		base.AskingMode = o.AskingMode
	}
	// A bool cannot say "unset": true grants network, false keeps base's.
	base.Network = base.Network || o.Network
	return base
}

// Get returns a copy of the named agent's spec.
func (c *Catalog) Get(name string) (berth.AgentSpec, bool) {
	a, ok := c.agents[name]
	if !ok {
		return berth.AgentSpec{}, false
	}
	a, _ = c.installed(cloneSpec(a))
	return a, true
}

// List describes every agent, sorted by name. Available reports whether the
// command resolves now: found in the daemon's PATH, or an existing
// executable file when it holds a "/".
func (c *Catalog) List() []berth.AgentInfo {
	out := make([]berth.AgentInfo, 0, len(c.agents))
	for _, a := range c.agents {
		out = append(out, c.info(a))
	}
	slices.SortFunc(out, func(x, y berth.AgentInfo) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// info describes agent a as it runs now: from the daemon's prefix when
// its package is installed there.
func (c *Catalog) info(a berth.AgentSpec) berth.AgentInfo {
	pkg := npxPackage(a)
	run, installed := c.installed(a)
	info := berth.AgentInfo{
		Name:        a.Name,
		Command:     run.Command,
		Args:        slices.Clone(run.Args),
		Available:   available(run.Command),
		Description: a.Description,
		Package:     pkg,
		Installed:   installed,
	}
	if a.ModelAPI != berth.ModelAPINone {
		info.ModelAPI = a.ModelAPI
	}
	if pkg != "" && !installed && info.Available {
		info.Fetch = !npmHas(pkg)
	}
	if info.Args == nil {
		info.Args = []string{}
	}
	return info
}

// npxPackage is the npm package an agent run by npx runs: its first
// argument that is not a flag; "" for any other command.
func npxPackage(a berth.AgentSpec) string {
	if path.Base(a.Command) != "npx" {
		return ""
	}
	for _, arg := range a.Args {
		if !strings.HasPrefix(arg, "-") {
			return arg
		}
	}
	return ""
}

// systemNpmGlobal are the global package directories of npm's usual
// prefixes, where it installs with no prefix set.
var systemNpmGlobal = []string{"/usr/local/lib/node_modules", "/usr/lib/node_modules"}

// npmHas reports whether an npm package (a version suffix aside) is where
// npx finds it without the registry: installed globally or in npx's cache.
func npmHas(pkg string) bool {
	// "@scope/name@1.2" and "name@1.2" name the package before the last "@".
	if i := strings.LastIndex(pkg, "@"); i > 0 {
		pkg = pkg[:i]
	}
	// npm's global prefix is the one the environment sets, else one of
	// the usual system ones: a package installed under another prefix is
	// not where this npx looks.
	var dirs []string
	if prefix := cmp.Or(os.Getenv("NPM_CONFIG_PREFIX"), os.Getenv("npm_config_prefix")); prefix != "" {
		dirs = append(dirs, path.Join(prefix, "lib/node_modules"))
	} else {
		dirs = append(dirs, systemNpmGlobal...)
	}
	if home, err := os.UserHomeDir(); err == nil {
		cache, _ := filepath.Glob(path.Join(home, ".npm/_npx/*/node_modules"))
		dirs = append(append(dirs, path.Join(home, ".npm-global/lib/node_modules")), cache...)
	}
	for _, d := range dirs {
		if _, err := os.Stat(path.Join(d, pkg, "package.json")); err == nil {
			return true
		}
	}
	return false
}

// available reports whether command names an executable file.
func available(command string) bool {
	if command == "" {
		return false
	}
	if strings.Contains(command, "/") {
		fi, err := os.Stat(command)
		return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
	}
	_, err := exec.LookPath(command)
	return err == nil
}

// validateAgents checks the [[agents]] entries: each has a valid, unique
// name; a new agent (not a built-in) has a command; env and pass_env hold
// variable names; home_files are relative paths inside the home.
func validateAgents(entries []berth.AgentSpec) error {
	seen := make(map[string]bool, len(entries))
	for i, a := range entries {
		if a.Name == "" {
			return invalid("agents[%d]: name is required", i)
		}
		if !agentName().MatchString(a.Name) {
			return invalid("agents[%d]: name %q must be letters, digits, '.', '_' or '-' (at most 64)", i, a.Name)
		}
		if seen[a.Name] {
			return invalid("agents[%d]: name %q appears twice", i, a.Name)
		}
		seen[a.Name] = true
		if a.Command == "" && !isBuiltin(a.Name) {
			return invalid("agents[%d] (%q): command is required for a new agent", i, a.Name)
		}
		for k := range a.Env {
			if !envName().MatchString(k) {
				return invalid("agents[%d] (%q): env key %q is not a variable name", i, a.Name, k)
			}
		}
		for k := range a.ModelEnv {
			if !envName().MatchString(k) {
				return invalid("agents[%d] (%q): model_env key %q is not a variable name", i, a.Name, k)
			}
		}
		for _, k := range a.PassEnv {
			if !envName().MatchString(k) {
				return invalid("agents[%d] (%q): pass_env entry %q is not a variable name", i, a.Name, k)
			}
		}
		if a.ModelAPI != "" && a.ModelAPI != berth.ModelAPINone && !slices.Contains(gateway.Kinds, gateway.Kind(a.ModelAPI)) {
			return invalid("agents[%d] (%q): model_api %q is none of anthropic, openai, openai-responses, gemini, none", i, a.Name, a.ModelAPI)
		}
		for _, f := range a.HomeFiles {
			if !homeRelative(f) {
				return invalid("agents[%d] (%q): home_files entry %q must be a relative path inside the home", i, a.Name, f)
			}
		}
		if err := checkAskingMode(i, a); err != nil {
			return err
		}
	}
	return nil
}

// checkAskingMode refuses entry i, as it overrides its built-in, when
// berth could not take the agent out of its self_deciding_modes: no
// asking_mode, or one of them.
func checkAskingMode(i int, a berth.AgentSpec) error {
	for _, b := range builtinAgents {
		if b.Name == a.Name {
			a = merge(cloneSpec(b), a)
		}
	}
	switch {
	case len(a.SelfDecidingModes) > 0 && a.AskingMode == "":
		return invalid("agents[%d] (%q): self_deciding_modes needs an asking_mode to put the agent in", i, a.Name)
	case slices.Contains(a.SelfDecidingModes, a.AskingMode):
		return invalid("agents[%d] (%q): asking_mode %q is one of its self_deciding_modes", i, a.Name, a.AskingMode)
	}
	return nil
}

// homeRelative reports whether f is a relative path that stays inside the
// home directory; a trailing "/" (a directory) is allowed.
func homeRelative(f string) bool {
	f = strings.TrimSuffix(f, "/")
	if f == "" || path.IsAbs(f) || path.Clean(f) != f {
		return false
	}
	return f != "." && f != ".." && !strings.HasPrefix(f, "../")
}

// isBuiltin reports whether name is a built-in agent.
func isBuiltin(name string) bool {
	return slices.ContainsFunc(builtinAgents, func(a berth.AgentSpec) bool { return a.Name == name })
}

// cloneSpec deep-copies a so callers cannot change the catalog.
func cloneSpec(a berth.AgentSpec) berth.AgentSpec {
	a.Args = slices.Clone(a.Args)
	a.Env = maps.Clone(a.Env)
	a.ModelEnv = maps.Clone(a.ModelEnv)
	a.PassEnv = slices.Clone(a.PassEnv)
	a.HomeFiles = slices.Clone(a.HomeFiles)
	a.SelfDecidingModes = slices.Clone(a.SelfDecidingModes)
	return a
}
