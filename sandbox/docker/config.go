package docker

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/internal/boxutil"
)

// DefaultLimits fill the limits that neither the session nor Options set:
// 4 GiB of memory (swap included), 512 processes; CPU, open files and the
// size of /tmp are left to the engine (what /tmp holds counts against the
// memory limit). Memory, CPU and pids are enforced by the engine's
// cgroups; open files by an RLIMIT_NOFILE ulimit; a /tmp cap
// (Limits.TmpBytes) by the tmpfs's size.
var DefaultLimits = berth.SandboxLimits{MemoryBytes: 4 << 30, Pids: 512}

// initScript is the container's pid 1: it sleeps forever and, as pid 1,
// reaps the orphans that `wait` collects. TERM (docker stop) ends it.
const initScript = `trap 'exit 0' TERM; while :; do sleep 86400 & wait; done`

// tmpfsOptions is the mount of /tmp, the one writable place that is not
// bound from the host; its size cap (Limits.TmpBytes) is added. What it
// holds counts against the memory limit.
const tmpfsOptions = "rw,nosuid,nodev,mode=1777"

// maskTmpfsOptions is the empty, read-only directory put over a hidden
// path of the host (SandboxConfig.Hide).
const maskTmpfsOptions = "ro,nosuid,nodev,noexec,size=4k,mode=0555"

// checkConfig refuses a config whose workspace, home or binds are not
// absolute paths of things that exist. Messages name roles, never host
// paths.
func checkConfig(cfg berth.SandboxConfig) error {
	if err := boxutil.CheckDir("docker", "workspace", cfg.Workspace); err != nil {
		return err
	}
	if cfg.Home != "" {
		if err := boxutil.CheckDir("docker", "home", cfg.Home); err != nil {
			return err
		}
	}
	for i, b := range cfg.Binds {
		if !filepath.IsAbs(b.Source) || !filepath.IsAbs(b.Target) {
			return berth.Errorf(berth.EInvalid, "docker: bind %d must have absolute source and target paths", i)
		}
		if _, err := os.Stat(b.Source); err != nil {
			return berth.WrapError(berth.EInvalid, err, "docker: the source of bind %d does not exist", i)
		}
	}
	for k := range cfg.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return berth.Errorf(berth.EInvalid, "docker: bad environment variable name %q", k)
		}
	}
	return nil
}

// limits merges a session's limits over the provider's and DefaultLimits,
// field by field: the first non-zero wins.
func limits(session, provider berth.SandboxLimits) berth.SandboxLimits {
	pick := func(vs ...int64) int64 {
		for _, v := range vs {
			if v > 0 {
				return v
			}
		}
		return 0
	}
	l := berth.SandboxLimits{
		MemoryBytes: pick(session.MemoryBytes, provider.MemoryBytes, DefaultLimits.MemoryBytes),
		NanoCPUs:    pick(session.NanoCPUs, provider.NanoCPUs, DefaultLimits.NanoCPUs),
		Pids:        pick(session.Pids, provider.Pids, DefaultLimits.Pids),
		TmpBytes:    pick(session.TmpBytes, provider.TmpBytes, DefaultLimits.TmpBytes),
	}
	for _, v := range []uint64{session.OpenFiles, provider.OpenFiles, DefaultLimits.OpenFiles} {
		if v > 0 {
			l.OpenFiles = v
			break
		}
	}
	return l
}

// environ is a process's environment as sorted "K=V" entries: cfg.Env,
// HOME (the session's home, or /tmp without one), then extra ("K=V"
// entries, already checked), later entries winning. It goes with each
// exec, not on the container: the container's init carries none of the
// session's variables.
func environ(cfg berth.SandboxConfig, extra []string) []string {
	m := maps.Clone(cfg.Env)
	if m == nil {
		m = map[string]string{}
	}
	m["HOME"] = cfg.Home
	if cfg.Home == "" {
		m["HOME"] = "/tmp"
	}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		env = append(env, k+"="+m[k])
	}
	return env
}

// containerSpec is the container's configuration for cfg, from image, run
// as who (see the package doc for what it enforces).
func (p *Provider) containerSpec(cfg berth.SandboxConfig, image string, who identity, cov *covers) (*container.Config, *container.HostConfig) {
	init := []string{"/bin/sh", "-c", initScript}
	mounts := []mount.Mount{{Type: mount.TypeBind, Source: cfg.Workspace, Target: cfg.Workspace}}
	if cfg.Home != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: cfg.Home, Target: cfg.Home})
	}
	for _, b := range cfg.Binds {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: b.Source, Target: b.Target, ReadOnly: !b.Writable})
	}
	if p.opts.Berth != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: p.opts.Berth, Target: BerthPath, ReadOnly: true})
	}
	if helper := p.helper(); helper != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: helper, Target: HelperPath, ReadOnly: true})
		init = []string{HelperPath, "sh", "-c", initScript}
	}
	lim := limits(cfg.Limits, p.opts.Limits)
	tmpOpts := tmpfsOptions
	if lim.TmpBytes > 0 {
		tmpOpts += ",size=" + strconv.FormatInt(lim.TmpBytes, 10)
	}
	tmpfs := map[string]string{"/tmp": tmpOpts}
	// The daemon's own files, inside the workspace or a bind, are covered
	// there (the engine mounts deeper targets last).
	for _, m := range boxutil.Masks(cfg) {
		if cover, ok := cov.path(m.Path); ok {
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: cover, Target: m.Path, ReadOnly: true})
		} else if m.Dir {
			tmpfs[m.Path] = maskTmpfsOptions
		} else {
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: os.DevNull, Target: m.Path, ReadOnly: true})
		}
	}
	res := container.Resources{Memory: lim.MemoryBytes, MemorySwap: lim.MemoryBytes, NanoCPUs: lim.NanoCPUs}
	if lim.Pids > 0 {
		res.PidsLimit = &lim.Pids
	}
	if lim.OpenFiles > 0 {
		n := int64(lim.OpenFiles)
		res.Ulimits = []*container.Ulimit{{Name: "nofile", Soft: n, Hard: n}}
	}
	network := container.NetworkMode("none")
	if cfg.Network {
		network = "" // the engine's default network
	}
	cc := &container.Config{
		Image:      image,
		Cmd:        init,
		Entrypoint: []string{},
		User:       who.user(),
		// The init needs no workspace (each exec names its own directory),
		// which Open gives the user only once the container runs.
		WorkingDir: "/",
		Hostname:   "berth",
		Labels:     map[string]string{LabelSession: cfg.SessionID, LabelManaged: "true"},
	}
	if p.opts.Instance != "" {
		cc.Labels[LabelInstance] = p.opts.Instance
	}
	hc := &container.HostConfig{
		Mounts:         mounts,
		Tmpfs:          tmpfs,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges", "seccomp=" + seccompProfile()},
		NetworkMode:    network,
		IpcMode:        "private",
		Resources:      res,
		LogConfig:      container.LogConfig{Type: "none"},
	}
	if who.hostNS {
		hc.UsernsMode = "host"
	}
	return cc, hc
}
