package config

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
)

// An agent that npx runs is fetched from the npm registry by npx at its
// first start, inside the agent's start, where the download counts
// against the handshake's deadline (a cold cache took 36 s). `berth agents
// install NAME` fetches it ahead into the daemon's own npm prefix, from
// which every session then runs it directly (docs/agents.md, Installing
// an agent ahead).

// InstallTimeout bounds one `npm install` of an agent's package.
const InstallTimeout = 10 * time.Minute

// WithPackages makes the catalog run an npx agent from dir, an npm prefix
// of the daemon's own, once its package is installed there (Install);
// other agents, and npx agents not installed there, are as before.
func (c *Catalog) WithPackages(dir string) *Catalog {
	c.packages = dir
	return c
}

// installed returns a, run from the daemon's prefix when its npx package
// is installed there: the package's program with the arguments after the
// package name. ok is false when a is not such an agent.
func (c *Catalog) installed(a berth.AgentSpec) (berth.AgentSpec, bool) {
	pkg := npxPackage(a)
	if c.packages == "" || pkg == "" {
		return a, false
	}
	bin, ok := packageBin(c.packages, pkg)
	if !ok {
		return a, false
	}
	i := slices.Index(a.Args, pkg)
	a.Command, a.Args = bin, slices.Clone(a.Args[i+1:])
	return a, true
}

// Install fetches the npm package of the npx agent name into the daemon's
// prefix with npm (its install scripts not run), so that its sessions run
// it without npx. EInvalid for an agent npx does not run, ENotFound for an
// unknown one, EUnavailable when npm is missing or fails (its last words
// in the message).
func (c *Catalog) Install(ctx context.Context, name string) (berth.AgentInfo, error) {
	return c.install(ctx, name, true)
}

// install is Install; unless again is set, a package found installed once
// the lock is taken is not fetched again.
func (c *Catalog) install(ctx context.Context, name string, again bool) (berth.AgentInfo, error) {
	a, ok := c.agents[name]
	if !ok {
		return berth.AgentInfo{}, berth.Errorf(berth.ENotFound, "no agent %q in the catalog", name)
	}
	pkg := npxPackage(a)
	if pkg == "" {
		return berth.AgentInfo{}, berth.Errorf(berth.EInvalid, "agent %q is not run by npx: there is nothing to install", name)
	}
	if c.packages == "" {
		return berth.AgentInfo{}, berth.Errorf(berth.EUnavailable, "this daemon has no directory for agents' packages")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return berth.AgentInfo{}, berth.Errorf(berth.EUnavailable, "npm is not installed (Debian package npm): it fetches %s", pkg)
	}
	c.installMu.Lock()
	defer c.installMu.Unlock()
	if _, installed := c.installed(a); installed && !again {
		return c.info(a), nil
	}
	if err := os.MkdirAll(c.packages, 0o755); err != nil {
		return berth.AgentInfo{}, berth.WrapError(berth.EUnavailable, err, "cannot create the agents' package directory")
	}
	if err := runNpm(ctx, npm, c.packages, pkg); err != nil {
		return berth.AgentInfo{}, err
	}
	if _, ok := packageBin(c.packages, pkg); !ok {
		return berth.AgentInfo{}, berth.Errorf(berth.EUnavailable, "npm ran, but %s (that version) with a program to run is not in the agents' packages", pkg)
	}
	return c.info(a), nil
}

// NeedsFetch reports whether a start of agent name would download its npm
// package first: an npx agent whose package is neither in the daemon's
// prefix nor where npx finds it without the registry. pkg is the package.
// False when the catalog cannot fetch it ahead (no prefix, no npm): npx
// is then left to do it, inside the handshake, as before.
func (c *Catalog) NeedsFetch(name string) (pkg string, need bool) {
	a, ok := c.agents[name]
	if !ok {
		return "", false
	}
	pkg = npxPackage(a)
	if pkg == "" || c.packages == "" {
		return pkg, false
	}
	if _, installed := c.installed(a); installed || npmHas(pkg) {
		return pkg, false
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return pkg, false
	}
	return pkg, true
}

// Fetch installs the package of the npx agent name into the daemon's
// prefix unless it is there already (a start that waited for another's
// fetch finds it done), and returns the agent's spec as it now runs.
// Errors are Install's.
func (c *Catalog) Fetch(ctx context.Context, name string) (berth.AgentSpec, error) {
	if _, err := c.install(ctx, name, false); err != nil {
		return berth.AgentSpec{}, err
	}
	spec, _ := c.Get(name)
	return spec, nil
}

// runNpm runs `npm install` of pkg into the prefix dir, in a process group
// of its own that is killed when ctx ends or InstallTimeout passes.
func runNpm(ctx context.Context, npm, dir, pkg string) error {
	ctx, cancel := context.WithTimeout(ctx, InstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund",
		"--ignore-scripts", "--loglevel=error", "--", pkg)
	// Files an agent's sandbox user reads: never npm's umask of the moment.
	cmd.Env = append(os.Environ(), "npm_config_umask=022")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return berth.WrapError(berth.EUnavailable, ctx.Err(), "npm install %s did not finish within %s", pkg, InstallTimeout)
	}
	return berth.WrapError(berth.EUnavailable, err, "npm install %s failed: %s", pkg, lastLines(out.String(), 5))
}

// lastLines is the last n non-empty lines of s, joined by " / ".
func lastLines(s string, n int) string {
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// packageBin returns the program the npm package pkg ("name" or
// "name@version", scoped or not) installed under the prefix dir provides:
// its bin entry named like the package (without its scope), or its only
// one. A pinned version must be the installed one.
func packageBin(dir, pkg string) (string, bool) {
	name, version := splitPackage(pkg)
	pdir := filepath.Join(dir, "node_modules", filepath.FromSlash(name))
	raw, err := os.ReadFile(filepath.Join(pdir, "package.json"))
	if err != nil {
		return "", false
	}
	var meta struct {
		Version string          `json:"version"`
		Bin     json.RawMessage `json:"bin"`
	}
	if json.Unmarshal(raw, &meta) != nil || (version != "" && version != meta.Version) {
		return "", false
	}
	rel, ok := binEntry(meta.Bin, name)
	if !ok {
		return "", false
	}
	bin := filepath.Join(pdir, filepath.FromSlash(rel))
	// The program stays inside its package.
	if !strings.HasPrefix(bin, pdir+string(filepath.Separator)) {
		return "", false
	}
	if fi, err := os.Stat(bin); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	return bin, true
}

// binEntry picks the program of a package.json "bin": a string, or the
// entry of an object named like the package (its scope left out), or its
// only entry.
func binEntry(raw json.RawMessage, name string) (string, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one, one != ""
	}
	var many map[string]string
	if json.Unmarshal(raw, &many) != nil || len(many) == 0 {
		return "", false
	}
	if rel, ok := many[filepath.Base(name)]; ok {
		return rel, true
	}
	if len(many) == 1 {
		for _, rel := range many {
			return rel, true
		}
	}
	return "", false
}

// splitPackage splits "@scope/name@1.2" into its name and version.
func splitPackage(pkg string) (name, version string) {
	if i := strings.LastIndex(pkg, "@"); i > 0 {
		return pkg[:i], pkg[i+1:]
	}
	return pkg, ""
}
