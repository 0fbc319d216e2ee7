// Package config loads berth's configuration: a TOML file (strictly decoded:
// an unknown key is an error naming it), then BERTH_<SECTION>_<KEY>
// environment overrides, then range checks. It also builds the agent catalog
// from the built-in agents and the file's [[agents]] entries.
//
// Every error it returns is a *berth.Error with code berth.EInvalid whose
// message names the offending key.
package config

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/local"
)

// Config is berth's whole configuration. The zero value is not useful: start
// from Default or Load.
type Config struct {
	Server  Server  `toml:"server"`
	Store   Store   `toml:"store"`
	Sandbox Sandbox `toml:"sandbox"`
	Limits  Limits  `toml:"limits"`
	// Checkpoints is the [checkpoints] section.
	Checkpoints Checkpoints       `toml:"checkpoints"`
	Agents      []berth.AgentSpec `toml:"agents"`
	// Hooks are the [[hooks]] entries.
	Hooks []Hook `toml:"hooks"`
	// Cluster is the [cluster] section.
	Cluster Cluster `toml:"cluster"`
	// Credentials is the [credentials] section.
	Credentials Credentials `toml:"credentials"`
	// Models are the [[models]] entries: the model gateway's upstreams.
	Models []Model `toml:"models"`
	// Storage is the [storage] section.
	Storage Storage `toml:"storage"`
}

// Server is the [server] section: where the API listens.
type Server struct {
	// Addr is the TCP listen address, host:port. Default "127.0.0.1:7380".
	Addr string `toml:"addr"`
	// Token is the bearer token every TCP request must carry; "" means the
	// one the daemon generates into $BERTH_HOME/token at first start.
	Token string `toml:"token"`
	// LoopbackWithoutToken lets a loopback TCP listener serve without a
	// token, as before v2 (a warning is logged at every start).
	LoopbackWithoutToken bool `toml:"loopback_without_token"`
	// AllowedHosts are Host header names accepted on TCP besides the listen
	// address, localhost, 127.0.0.1 and [::1].
	AllowedHosts []string `toml:"allowed_hosts"`
	// AllowedOrigins are the Origin values (scheme://host[:port]) that may
	// call the API from a browser besides the daemon's own origin.
	AllowedOrigins []string `toml:"allowed_origins"`
	// SessionTTL is how long a browser sign-in lasts (1m..30d, default 12h).
	SessionTTL Duration `toml:"session_ttl"`
	// BodyTimeout is how long a request body may take to arrive
	// (1s..1h, default 30s).
	BodyTimeout Duration `toml:"body_timeout"`
	// MaxConnections caps the open TCP connections (8..1000000, default 512).
	MaxConnections int `toml:"max_connections"`
	// Socket is the Unix socket path; "" means $BERTH_HOME/berth.sock.
	Socket string `toml:"socket"`
	// StopSessionsOnExit stops every session when the daemon exits instead
	// of leaving agents to be resumed by the next daemon.
	StopSessionsOnExit bool `toml:"stop_sessions_on_exit"`
	// LogFormat is "text", "json", or "" for text on a terminal and JSON
	// otherwise; berth serve --log-format overrides it.
	LogFormat string `toml:"log_format"`
	// LogLevel is "debug", "info" (""), "warn" or "error"; berth serve
	// --log-level overrides it.
	LogLevel string `toml:"log_level"`
}

// Store is the [store] section: where sessions and events are kept.
type Store struct {
	// URL is "sqlite:PATH", "postgres://…" or MemoryURL; "" means SQLite
	// under the home.
	URL string `toml:"url"`
	// Sync is the durability level: "normal" or "full". Default "normal".
	Sync string `toml:"sync"`
}

// MemoryURL is the store URL of the in-memory store (store/memory): for
// tests and throwaway runs, it loses every session when the daemon exits.
const MemoryURL = "memory:"

// Store sync levels.
const (
	SyncNormal = "normal"
	SyncFull   = "full"
)

// Sandbox is the [sandbox] section: which provider sessions get by default
// and what policy allows.
type Sandbox struct {
	// Default is the provider for sessions that do not name one: "auto",
	// "host", "bwrap" or "docker". Default "auto".
	Default string `toml:"default"`
	// AllowHost permits the unisolated host provider. Default true.
	AllowHost bool `toml:"allow_host"`
	// RequireIsolation refuses to fall back to host when "auto" finds no
	// isolating provider.
	RequireIsolation bool `toml:"require_isolation"`
	// AllowNetwork permits sessions to ask for network access. Default true.
	AllowNetwork bool `toml:"allow_network"`
	// Network is the network of sessions that do not ask: true, false
	// (the default) or an allow list, a table {allow = [...], ask = false}
	// (docs/api.md, Network policy). NetworkPolicy reads it.
	Network any `toml:"network"`
	// UID is the unprivileged user agents run as inside bwrap, and
	// inside docker when a root daemon's engine maps a user namespace.
	// Default 1000.
	UID int `toml:"uid"`
	// HostUID is the host uid (and gid) a root daemon starts bwrap
	// sandboxes as, so that the sandbox's user maps to it rather than to
	// root, and runs docker containers as when the engine maps no user
	// namespace (inside as on the host: uid 1000 is a login account on
	// most hosts): every file an agent writes belongs to it. Default 99999
	// (DefaultHostUID); 1000..4294967294, not 65535. A daemon that is not
	// root runs its sandboxes as itself and ignores it.
	HostUID int `toml:"host_uid"`
	// MemoryMB is the memory limit of sessions that ask for none (create's
	// memory_mb), in MiB, swap and the private /tmp's files included:
	// docker's engine limit, bwrap's memory cgroup where the daemon may
	// make one (left out, with a runtime_warning, where it may not).
	// Default 2048; 0 means no limit.
	MemoryMB int `toml:"memory_mb"`
	// MaxMemoryMB caps the memory_mb a session may ask for (400 past it).
	// Default 0: no cap.
	MaxMemoryMB int `toml:"max_memory_mb"`
	// TmpMB caps the size of a bwrap or docker sandbox's private /tmp
	// (and bwrap's /var/tmp), in MiB. Default 256; 0 leaves the kernel's
	// default, half the host's memory.
	TmpMB int `toml:"tmp_mb"`
	// CPUs caps a session's CPU time, in CPUs, where the provider can
	// (docker). Default 2; 0 means no cap.
	CPUs float64 `toml:"cpus"`
	// Pids caps a session's processes where the provider can (docker).
	// Default 512; 0 means no cap.
	Pids int `toml:"pids"`
	// Docker is the [sandbox.docker] section.
	Docker SandboxDocker `toml:"docker"`
	// Mounts are the [[sandbox.mounts]] allow-list: host directories (or
	// files) a session may ask for by name at create, bound read-only at
	// their target in its sandbox (a package or model cache).
	Mounts []SandboxMount `toml:"mounts"`
}

// SandboxMount is one [[sandbox.mounts]] entry.
type SandboxMount struct {
	// Name is what a create request's "mounts" names.
	Name string `toml:"name"`
	// Host is the absolute path on the host; it must exist.
	Host string `toml:"host"`
	// Target is the absolute path inside the sandbox; not over the
	// sandbox's own directories (/usr, /etc, /tmp, /proc, ...).
	Target string `toml:"target"`
}

// MountList returns the [[sandbox.mounts]] as the session manager takes them.
func (s *Sandbox) MountList() []berth.Mount {
	out := make([]berth.Mount, 0, len(s.Mounts))
	for _, m := range s.Mounts {
		out = append(out, berth.Mount{Name: m.Name, Host: m.Host, Target: m.Target})
	}
	return out
}

// SandboxDocker is the [sandbox.docker] section.
type SandboxDocker struct {
	// Host is the Docker engine endpoint; "" means $DOCKER_HOST or
	// unix:///var/run/docker.sock.
	Host string `toml:"host"`
	// Image is the image of sessions whose agent names none. Default
	// "berth-sandbox:local", which berth builds itself when missing.
	Image string `toml:"image"`
}

// Limits returns the sandbox limits the section sets.
func (s *Sandbox) Limits() berth.SandboxLimits {
	return berth.SandboxLimits{MemoryBytes: int64(s.MemoryMB) << 20, NanoCPUs: int64(s.CPUs * 1e9), Pids: int64(s.Pids),
		TmpBytes: int64(s.TmpMB) << 20}
}

// Limits is the [limits] section.
type Limits struct {
	// MaxPromptBytes caps one prompt's text (1 B..64 MiB, default 256 KiB).
	MaxPromptBytes int `toml:"max_prompt_bytes"`
	// MaxQueue caps the pending prompts of one session (1..10000, default 10).
	MaxQueue int `toml:"max_queue"`
	// MaxSessions caps the sessions one daemon runs (1..100000, default 1000).
	MaxSessions int `toml:"max_sessions"`
	// MaxChildren caps the live children of one session (0..1000, default 5).
	MaxChildren int `toml:"max_children"`
	// MaxDepth caps the nesting of child sessions (0..16, default 1).
	MaxDepth int `toml:"max_depth"`
	// PermissionTimeout expires an undecided permission request (default 5m).
	PermissionTimeout Duration `toml:"permission_timeout"`
	// IdleTimeout stops a session idle this long (default 30m, 0 = never).
	IdleTimeout Duration `toml:"idle_timeout"`
	// TTL stops a session this long after creation (default 0 = none).
	TTL Duration `toml:"ttl"`
	// StallAfter marks a turn hung after this long without agent activity
	// (default 2m).
	StallAfter Duration `toml:"stall_after"`
	// StallTimeout stops a session hung this long (default 0 = none).
	StallTimeout Duration `toml:"stall_timeout"`
	// OrphanTimeout is how long a shim keeps its agent with no daemon
	// attached before it stops it and exits (default 15m, at least 1s).
	OrphanTimeout Duration `toml:"orphan_timeout"`
	// CancelGrace is how long a cancelled turn may take to end (default 10s).
	CancelGrace Duration `toml:"cancel_grace"`
	// StopGrace is the SIGTERM → SIGKILL delay when stopping an agent
	// (default 5s).
	StopGrace Duration `toml:"stop_grace"`
	// HandshakeTimeout bounds the ACP initialize/new-session handshake
	// (default 30s).
	HandshakeTimeout Duration `toml:"handshake_timeout"`
	// MaxLineBytes caps one JSON-RPC line from an agent (1 KiB..1 GiB,
	// default 64 MiB).
	MaxLineBytes int `toml:"max_line_bytes"`
	// SessionInflightBytes bounds, per session, the bytes of agent output
	// read and not yet committed to the log (64 KiB..1 GiB, default 16
	// MiB): past it the session's reader waits, which holds the agent back
	// (nothing is dropped). One line longer than it goes through alone.
	SessionInflightBytes int `toml:"session_inflight_bytes"`
	// MaxTurnOutput caps the agent's output recorded per turn, and between
	// two turns (1 MiB..64 GiB, default 64 MiB): past it the rest is
	// dropped from the log, and one runtime_warning says how much.
	MaxTurnOutput int `toml:"max_turn_output"`
}

// Size units.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
	// PiB is the largest checkpoints.max_tree_bytes: unbounded in effect.
	PiB = 1 << 50
)

// Default returns the configuration berth runs with when nothing is set.
func Default() *Config {
	return &Config{
		Server: Server{Addr: "127.0.0.1:7380", SessionTTL: Duration{12 * time.Hour},
			BodyTimeout: Duration{30 * time.Second}, MaxConnections: 512},
		Store: Store{Sync: SyncNormal},
		Sandbox: Sandbox{
			Default:      berth.SandboxAuto,
			AllowHost:    true,
			AllowNetwork: true,
			Network:      false,
			UID:          1000,
			HostUID:      DefaultHostUID,
			MemoryMB:     2048,
			TmpMB:        256,
			CPUs:         2,
			Pids:         512,
			Docker:       SandboxDocker{Image: DefaultDockerImage},
		},
		Checkpoints: defaultCheckpoints(),
		Storage:     defaultStorage(),
		Cluster:     Cluster{LeaseTTL: Duration{DefaultLeaseTTL}},
		Limits: Limits{
			MaxPromptBytes:    256 * KiB,
			MaxQueue:          10,
			MaxSessions:       1000,
			MaxChildren:       5,
			MaxDepth:          1,
			PermissionTimeout: Duration{5 * time.Minute},
			IdleTimeout:       Duration{30 * time.Minute},
			StallAfter:        Duration{2 * time.Minute},
			OrphanTimeout:     Duration{15 * time.Minute},
			CancelGrace:       Duration{10 * time.Second},
			StopGrace:         Duration{5 * time.Second},
			HandshakeTimeout:  Duration{30 * time.Second},
			MaxLineBytes:      64 * MiB,
			MaxTurnOutput:     64 * MiB,

			SessionInflightBytes: 16 * MiB,
		},
	}
}

// maxSocketPath is the longest Unix socket path Linux accepts (sun_path is
// 108 bytes including the terminating NUL).
const maxSocketPath = 107

// Validate checks every value's range and the consistency between values. It
// returns the first problem found, as EInvalid naming the key.
func (c *Config) Validate() error {
	for _, check := range []func() error{
		c.Server.validate, c.Store.validate, c.Sandbox.validate, c.Limits.validate, c.Checkpoints.validate,
		func() error { return validateAgents(c.Agents) },
		func() error { return validateHooks(c.Hooks) },
		c.validateCluster, c.Credentials.validate, c.validateModels, c.Storage.validate,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) validate() error {
	switch s.LogFormat {
	case "", "text", "json":
	default:
		return invalid("server.log_format %q: want text or json", s.LogFormat)
	}
	switch s.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		return invalid("server.log_level %q: want debug, info, warn or error", s.LogLevel)
	}
	_, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return invalid("server.addr %q is not host:port", s.Addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return invalid("server.addr %q has an invalid port", s.Addr)
	}
	if s.Socket != "" {
		if !filepath.IsAbs(s.Socket) {
			return invalid("server.socket must be an absolute path")
		}
		if len(s.Socket) > maxSocketPath {
			return invalid("server.socket is longer than %d bytes, the Unix socket limit", maxSocketPath)
		}
	}
	for _, h := range s.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ \t@") {
			return invalid("server.allowed_hosts: %q is not a host name", h)
		}
	}
	for _, o := range s.AllowedOrigins {
		if !validOrigin(o) {
			return invalid("server.allowed_origins: %q is not an origin (want scheme://host[:port])", o)
		}
	}
	if s.SessionTTL.Duration < time.Minute || s.SessionTTL.Duration > 30*24*time.Hour {
		return invalid("server.session_ttl = %s is out of range (1m..720h)", s.SessionTTL)
	}
	if s.BodyTimeout.Duration < time.Second || s.BodyTimeout.Duration > time.Hour {
		return invalid("server.body_timeout = %s is out of range (1s..1h)", s.BodyTimeout)
	}
	return intRange("server.max_connections", s.MaxConnections, 8, 1000000)
}

// validOrigin reports whether o is a browser origin: http or https, a host,
// an optional port, and nothing else.
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.Path == "" && u.RawQuery == "" && u.Fragment == "" && u.User == nil && u.String() == o
}

func (s *Store) validate() error {
	switch {
	case s.URL == "", s.URL == MemoryURL,
		strings.HasPrefix(s.URL, "sqlite:") && len(s.URL) > len("sqlite:"),
		strings.HasPrefix(s.URL, "postgres://"),
		strings.HasPrefix(s.URL, "postgresql://"):
	default:
		// The URL may hold a password: never echo it.
		return invalid("store.url must be sqlite:PATH, postgres://… or memory:")
	}
	if s.Sync != SyncNormal && s.Sync != SyncFull {
		return invalid("store.sync %q must be %q or %q", s.Sync, SyncNormal, SyncFull)
	}
	return nil
}

func (s *Sandbox) validate() error {
	if s.Default != berth.SandboxAuto && !slices.Contains(berth.SandboxProviders, s.Default) {
		return invalid("sandbox.default %q must be one of auto, %s", s.Default, strings.Join(berth.SandboxProviders, ", "))
	}
	// A default without isolation is the host's, which policy may forbid.
	if p := local.Make(local.Options{}, s.Default); p != nil && p.Capabilities().Isolation == 0 {
		if !s.AllowHost {
			return invalid("sandbox.default is %q but sandbox.allow_host is false", s.Default)
		}
		if s.RequireIsolation {
			return invalid("sandbox.default is %q but sandbox.require_isolation is true", s.Default)
		}
	}
	p, err := s.NetworkPolicy()
	if err != nil {
		return err
	}
	if p.Mode != berth.NetworkNone && !s.AllowNetwork {
		return invalid("sandbox.network is %s but sandbox.allow_network is false", p.Mode)
	}
	if err := intRange("sandbox.uid", s.UID, 0, 1<<32-2); err != nil {
		return err
	}
	if err := intRange("sandbox.host_uid", s.HostUID, 1000, 1<<32-2); err != nil {
		return err
	}
	if s.HostUID == 65535 {
		return invalid("sandbox.host_uid = 65535 is not a usable uid (it is -1 to 16-bit interfaces)")
	}
	if err := intRange("sandbox.memory_mb", s.MemoryMB, 0, 1<<24); err != nil {
		return err
	}
	if s.MemoryMB > 0 && s.MemoryMB < 32 {
		return invalid("sandbox.memory_mb = %d is too small for an agent (0, or 32 and up)", s.MemoryMB)
	}
	if err := intRange("sandbox.max_memory_mb", s.MaxMemoryMB, 0, 1<<24); err != nil {
		return err
	}
	if s.MaxMemoryMB > 0 && s.MemoryMB > s.MaxMemoryMB {
		return invalid("sandbox.memory_mb (%d) is over sandbox.max_memory_mb (%d)", s.MemoryMB, s.MaxMemoryMB)
	}
	if err := intRange("sandbox.tmp_mb", s.TmpMB, 0, 1<<24); err != nil {
		return err
	}
	if err := intRange("sandbox.pids", s.Pids, 0, 1<<22); err != nil {
		return err
	}
	if s.CPUs < 0 || s.CPUs > 1024 {
		return invalid("sandbox.cpus = %g is out of range (0..1024)", s.CPUs)
	}
	if s.Docker.Image == "" {
		return invalid("sandbox.docker.image must not be empty")
	}
	return s.validateMounts()
}

// validateMounts checks [[sandbox.mounts]]: each valid (berth.Mount.Validate),
// its host path present, names and targets unique.
func (s *Sandbox) validateMounts() error {
	names, targets := map[string]bool{}, map[string]bool{}
	for i, m := range s.MountList() {
		if err := m.Validate(); err != nil {
			return invalid("sandbox.mounts[%d]: %s", i, berth.ErrorMessage(err))
		}
		if _, err := os.Stat(m.Host); err != nil {
			return invalid("sandbox.mounts[%d] (%s): host %s does not exist", i, m.Name, m.Host)
		}
		if names[m.Name] || targets[m.Target] {
			return invalid("sandbox.mounts[%d] (%s): its name or target is another mount's", i, m.Name)
		}
		names[m.Name], targets[m.Target] = true, true
	}
	return nil
}

// DefaultHostUID is [sandbox] host_uid's default: the bwrap provider's
// DefaultHostUID, above human users and systemd's dynamic users, below
// the subordinate ids of rootless containers, and not nobody's.
const DefaultHostUID = 99999

// DefaultDockerImage is the image berth builds itself for docker sessions.
const DefaultDockerImage = "berth-sandbox:local"

// never is the upper bound of durations that have none worth checking.
const never = time.Duration(1<<63 - 1)

func (l *Limits) validate() error {
	ints := []struct {
		key      string
		v        int
		min, max int
	}{
		{"limits.max_prompt_bytes", l.MaxPromptBytes, 1, 64 * MiB},
		{"limits.max_queue", l.MaxQueue, 1, 10000},
		{"limits.max_sessions", l.MaxSessions, 1, 100000},
		{"limits.max_children", l.MaxChildren, 0, 1000},
		{"limits.max_depth", l.MaxDepth, 0, 16},
		{"limits.max_line_bytes", l.MaxLineBytes, KiB, GiB},
		{"limits.session_inflight_bytes", l.SessionInflightBytes, 64 * KiB, GiB},
		{"limits.max_turn_output", l.MaxTurnOutput, MiB, 64 * GiB},
	}
	for _, r := range ints {
		if err := intRange(r.key, r.v, r.min, r.max); err != nil {
			return err
		}
	}
	const day = 24 * time.Hour
	durs := []struct {
		key      string
		v        Duration
		min, max time.Duration
	}{
		{"limits.permission_timeout", l.PermissionTimeout, time.Second, 7 * day},
		{"limits.idle_timeout", l.IdleTimeout, 0, never},
		{"limits.ttl", l.TTL, 0, never},
		{"limits.stall_after", l.StallAfter, time.Second, day},
		{"limits.stall_timeout", l.StallTimeout, 0, never},
		{"limits.orphan_timeout", l.OrphanTimeout, time.Second, 7 * day},
		{"limits.cancel_grace", l.CancelGrace, 0, 10 * time.Minute},
		{"limits.stop_grace", l.StopGrace, 0, 10 * time.Minute},
		{"limits.handshake_timeout", l.HandshakeTimeout, time.Second, time.Hour},
	}
	for _, r := range durs {
		if r.v.Duration < r.min || r.v.Duration > r.max {
			if r.max == never {
				return invalid("%s = %s is out of range (at least %s)", r.key, r.v, Duration{r.min})
			}
			return invalid("%s = %s is out of range (%s..%s)", r.key, r.v, Duration{r.min}, Duration{r.max})
		}
	}
	return nil
}

// intRange refuses v outside [lo, hi], naming key.
func intRange(key string, v, lo, hi int) error {
	if v < lo || v > hi {
		return invalid("%s = %d is out of range (%d..%d)", key, v, lo, hi)
	}
	return nil
}

// invalid returns an EInvalid error whose message starts with "config: ".
func invalid(format string, args ...any) *berth.Error {
	return berth.Errorf(berth.EInvalid, "config: "+format, args...)
}

// NetworkPolicy is [sandbox] network as a policy. EInvalid naming the
// key (sandbox.network.allow[1]) for one that is not a policy.
func (s *Sandbox) NetworkPolicy() (berth.NetworkPolicy, error) {
	if s.Network == nil {
		return berth.NetworkPolicy{}, nil
	}
	p, err := berth.NetworkPolicyFrom(s.Network)
	if err != nil {
		return berth.NetworkPolicy{}, invalid("sandbox.%s", err.(*berth.Error).Message)
	}
	return p, nil
}
