// Package bwrap is the sandbox provider built on bubblewrap (Debian's
// /usr/bin/bwrap): Linux namespaces, no daemon, no image.
//
// Each Sandbox.Start runs one bwrap, which gives the process:
//
//   - new user, pid, mount, ipc, uts, cgroup and network namespaces;
//     creating further user namespaces is refused (bwrap
//     --disable-userns), and no capability is left, not even in the
//     bounding set. The network namespace holds only its own loopback
//     unless SandboxConfig.Network is set; then slirp4netns gives it
//     user-mode networking (a tap device, NAT through the host, DNS at
//     10.0.2.3) that never reaches the host's loopback (see userNet;
//     a daemon that is not root makes that namespace itself, for the
//     outer bwrap). The host's network namespace is never shared;
//   - an unprivileged uid and gid inside (1000 unless Options say
//     otherwise), no capabilities, no_new_privs, a session of its own (no
//     controlling terminal to inject input into);
//   - a filesystem made of the host's system directories read-only (/usr,
//     /bin, /sbin, /lib*, /opt as present), a few non-secret files of /etc
//     (resolver, loader cache, certificates, time zone; never shadow, ssh
//     keys or ssl/private; through one view of them, Options.EtcView,
//     see etcview.go), a passwd and group naming only root, the
//     sandbox user and nobody, its own /proc and a minimal /dev, private
//     tmpfs /tmp and /var/tmp, the workspace and the private HOME bound
//     read-write at their own paths, and SandboxConfig.Binds; the rest of
//     the root is read-only and empty;
//   - only the environment the caller passed (the daemon's is never
//     inherited). It reaches bwrap through a memory file (--args), never
//     through bwrap's own environment, where a variable such as LD_PRELOAD
//     would act on bwrap outside the sandbox, nor its command line, which
//     every user of the host can read.
//
// Host uid. A root daemon starts bwrap as Options.HostUID (its ids set
// in the child before the exec), so that the uid inside maps to it, never
// to root: what the sandbox writes in the workspace and HOME belongs to
// it. Open gives it the HOME and the workspace's root-owned entries, and
// the workspace, HOME and binds reach bwrap through a stage (see stage),
// since it may not cross the directories they lie in. This needs
// unprivileged user namespaces; Probe checks. A daemon that is not root
// runs bwrap as itself: the uid inside maps to the daemon's (with
// network, through uid 0 of the user namespace the daemon makes for the
// outer bwrap).
//
// Failures. A sandbox that does not start says why in its error's
// message, in the words of the tool that failed: bwrap's (from its
// stderr, which a caller's writer gets too) or slirp4netns's, bounded.
//
// Processes. Process.Pid is the outer bwrap, leader of a process group of
// its own (internal/procgroup), so SIGKILL to that group, as for the host
// provider, ends the sandbox. bwrap's first process inside is the pid
// namespace's init and runs with --die-with-parent: when the outer bwrap
// dies, for any reason, everything in the sandbox dies with it, whatever
// it did (setsid, double forks, a cleared environment). The program runs
// in init's process group. bwrap forwards no signal, so Process.Signal
// and Stop's SIGTERM go to that group directly, and SIGKILL to the outer
// bwrap and init. bwrap reports a death by signal n as exit code 128+n;
// Process reports it back as that signal. Process.Wait returns only once
// the whole pid namespace is gone, and Sandbox.Close kills every process
// the sandbox still runs. On its first Start the provider marks the
// daemon's inherited descriptors close-on-exec (process-wide), so that
// none leaks into a sandbox.
//
// Limits. SandboxLimits.OpenFiles is enforced (RLIMIT_NOFILE, set with
// util-linux prlimit(1) on bwrap, inherited by everything inside).
// SandboxLimits.Pids and MemoryBytes are enforced with cgroups made per
// sandbox under the daemon's own (v1: a pids and a memory cgroup; v2: one
// cgroup with both controllers), when the daemon may create cgroups there
// (root, or a delegated cgroup): bwrap is born in them (v1: the thread
// that forks it joins them first; v2: it is cloned into it, clone3's
// CLONE_INTO_CGROUP, Linux 5.7 and later), so nothing inside escapes the
// count. Under v1 a shim makes its sandbox's cgroups while it waits for
// its job, and joins them once then (Prewarm): a thread's first join of
// a cgroup just made takes the kernel milliseconds. Memory is memory.max with
// memory.swap.max 0 (v2), or memory.limit_in_bytes and
// memory.memsw.limit_in_bytes (v1, the latter where the kernel accounts
// swap): swap does not add to it, and the sandbox's tmpfs pages count in
// it. Past it the kernel kills the biggest process of the sandbox (never
// one outside); Process reports such kills in ExitStatus.OOMKills.
// LimitsPids and LimitsMemory report whether this host allows them. A
// pids limit the host does not allow is left out (RLIMIT_NPROC cannot do
// it: the kernel never applies it to the host's root, and for a non-root
// daemon it would count every process of the daemon's user); a memory
// limit never is: Open fails with EUnavailable saying why (RLIMIT_AS
// bounds address space, not memory, and breaks Go, Node and JVM
// programs, which reserve far more than they use). NanoCPUs is not
// enforced: no rlimit bounds a CPU rate. SandboxLimits.TmpBytes caps the
// private /tmp and /var/tmp tmpfs (bwrap --size); writes past it fail
// with ENOSPC.
//
// Seccomp. Every process runs under a filter (see seccompProgram): set-id
// mode bits are refused, and so are the system calls Docker's default
// profile refuses a container without capabilities that reach the
// kernel's less travelled code (keyrings, mount and namespace calls, BPF,
// perf, userfaultfd, modules, kexec, swap, reboot, clock setting…, with
// EPERM); a call of another architecture or ABI kills the process.
//
// Hidden paths. SandboxConfig.Hide paths that lie inside the workspace,
// the home or a bind are covered there: an empty tmpfs over a directory,
// /dev/null over a file.
//
// Not covered: CPU use is unbounded.
package bwrap

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/optx"
	"github.com/berth-sh/berth/internal/syncx"
	"github.com/berth-sh/berth/internal/wsdir"
	"github.com/berth-sh/berth/sandbox/internal/boxutil"
)

// DefaultUID and DefaultGID are the ids processes run as inside a sandbox
// unless Options say otherwise.
const (
	DefaultUID = 1000
	DefaultGID = 1000
)

// DefaultPath is where Debian installs bwrap.
const DefaultPath = "/usr/bin/bwrap"

// probeTimeout bounds Probe's trial sandbox.
const probeTimeout = 10 * time.Second

// Options configure a Provider.
type Options struct {
	// Path is the bwrap binary; empty means DefaultPath, or "bwrap" in
	// the daemon's PATH when DefaultPath is missing.
	Path string
	// UID and GID are the ids processes run as inside; 0 means
	// DefaultUID and DefaultGID (root inside is not offered).
	UID, GID int
	// HostUID is the host uid, and gid, bwrap runs as when the daemon is
	// root, so that the sandbox's uid maps to it and not to root: every
	// file the sandbox writes belongs to it. 0 means DefaultHostUID. A
	// daemon that is not root cannot change its uid: its sandboxes map to
	// its own, and HostUID is ignored.
	HostUID int
	// Slirp is the slirp4netns binary that gives sandboxes with network
	// their user-mode network; empty means DefaultSlirpPath, or
	// "slirp4netns" in the daemon's PATH.
	Slirp string
	// EtcView is the directory the provider keeps its view of the host's
	// /etc in, shared by its sandboxes and bound at /etc whole (see
	// etcview.go); its parent must exist. Empty: each entry is bound by
	// itself.
	EtcView string
}

// Provider makes bwrap sandboxes. It is safe for concurrent use.
type Provider struct {
	path     string
	slirp    string
	uid, gid int
	// hostUID is the host uid bwrap runs as; 0 when the daemon is not
	// root (bwrap then runs as the daemon).
	hostUID int
	// lenient leaves the seccomp filter's deny list out: set by tests
	// only, to show what the list changes.
	lenient bool
	// etcView is Options.EtcView.
	etcView string
}

var _ core.SandboxProvider = (*Provider)(nil)

// New returns a bwrap provider. It does not check that bwrap works: Probe
// does.
func New(opts Options) *Provider {
	p := &Provider{path: opts.Path, slirp: opts.Slirp, uid: opts.UID, gid: opts.GID, etcView: opts.EtcView}
	if p.slirp == "" {
		p.slirp = slirpPath()
	}
	if p.path == "" {
		p.path = DefaultPath
		if _, err := os.Stat(DefaultPath); err != nil {
			if found, err := exec.LookPath("bwrap"); err == nil {
				p.path = found
			}
		}
	}
	optx.Default(&p.uid, DefaultUID)
	optx.Default(&p.gid, DefaultGID)
	if os.Geteuid() == 0 {
		p.hostUID = opts.HostUID
		optx.Default(&p.hostUID, DefaultHostUID)
	}
	return p
}

// Name is "bwrap".
func (*Provider) Name() string { return core.SandboxBwrap }

// Capabilities implements core.SandboxProvider: namespaces over the
// host's own files (host paths hold), binds, limits; SandboxAuto's pick.
func (*Provider) Capabilities() core.SandboxCapabilities {
	return core.SandboxCapabilities{Isolation: 1, Preferred: true, HostPaths: true, Binds: true, Limits: true}
}

// Probe runs a trial sandbox made as Start makes them (every namespace,
// the system directories, /proc, /dev, a tmpfs) around /bin/true. It
// returns EUnavailable with bwrap's own words when bwrap is missing or
// cannot make its namespaces here (user namespaces disabled, a container
// without the rights to mount /proc).
func (p *Provider) Probe(ctx context.Context) error {
	if _, err := os.Stat(p.path); err != nil {
		return core.WrapError(core.EUnavailable, err, "bwrap: bubblewrap is not installed (Debian package bubblewrap)")
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	// The namespaces and the mounts only the kernel makes (proc, dev,
	// tmpfs), beside the system directories: what fails on a host that
	// cannot sandbox. /etc's entries are more of the same binds, two dozen
	// of them (or the home's view, which Open refreshes, so writes): left
	// to Trial, so that the probe writes nothing and may run before the
	// daemon holds its home.
	ms := append(systemDirMounts(), mount{kind: procfs, dst: "/proc"}, mount{kind: devfs, dst: "/dev"}, mount{kind: tmpfs, dst: "/tmp"})
	args := append(p.namespaceArgs(false), ms.args()...)
	args = append(args, "--", "true")
	cmd := exec.CommandContext(ctx, p.path, args...)
	cmd.Env = []string{"PATH=" + defaultPath}
	cmd.Dir = "/"
	// In a group of its own, killed whole at the timeout, and killed with
	// the daemon: a daemon killed mid-probe leaves no bwrap behind
	// (bwrap's --die-with-parent is its sandbox's, not its own).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if p.dropping() {
		// As Start runs it: as the host uid, which needs unprivileged
		// user namespaces (user.max_user_namespaces > 0, and Debian's
		// kernel.unprivileged_userns_clone = 1 where it exists).
		cmd.SysProcAttr.Credential = p.hostCredential()
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Once bwrap is gone (done, or killed at the timeout), a process of
	// the sandbox that outlived it holding its output open does not hold
	// the probe (and the daemon's close, which waits for it) for ever.
	cmd.WaitDelay = time.Second
	// The death signal is the forking thread's: held by this goroutine
	// until bwrap is reaped, no other may end it (a locked goroutine
	// that returns takes its thread along).
	runtime.LockOSThread()
	err := cmd.Run()
	runtime.UnlockOSThread()
	if err != nil {
		msg := bytes.TrimSpace(out.Bytes())
		if len(msg) > 512 {
			msg = msg[:512]
		}
		as := ""
		if p.dropping() {
			as = fmt.Sprintf(" as uid %d (unprivileged user namespaces must be allowed)", p.hostUID)
		}
		return core.WrapError(core.EUnavailable, fmt.Errorf("%w: %s", err, msg),
			"bwrap: cannot make a sandbox on this host%s: %s", as, firstLine(msg))
	}
	return nil
}

// Trial starts a sandbox as a session's is started (Open, then Start),
// with network when asked, on a workspace and home of its own, runs
// "true" in it and waits: nil when it ran, else EUnavailable with the
// words of the tool that failed (bwrap's, slirp4netns's). Probe checks
// bwrap's namespaces; Trial checks everything a session needs of this
// host and of the daemon's user.
func (p *Provider) Trial(ctx context.Context, network bool) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "berth-bwrap-trial-")
	if err != nil {
		return core.WrapError(core.EUnavailable, err, "bwrap: cannot make the trial sandbox's directory: %s", err)
	}
	defer os.RemoveAll(dir)
	cfg := core.SandboxConfig{SessionID: "trial", Workspace: filepath.Join(dir, "workspace"), Home: filepath.Join(dir, "home"), Network: network}
	for _, d := range []string{cfg.Workspace, cfg.Home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return core.WrapError(core.EUnavailable, err, "bwrap: cannot make the trial sandbox's directory: %s", err)
		}
	}
	sb, err := p.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer sb.Close(context.WithoutCancel(ctx))
	out := syncx.NewTail(maxWords)
	proc, err := sb.Start(ctx, core.ProcSpec{Path: "true", Stdin: bytes.NewReader(nil), Stdout: out, Stderr: out})
	if err != nil {
		return err
	}
	var st core.ExitStatus
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		st, _ = proc.Wait()
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		_, _ = proc.Stop(context.WithoutCancel(ctx), 0)
		<-waited
		return core.Errorf(core.EUnavailable, "bwrap: the trial sandbox's program did not end within %s", probeTimeout)
	}
	if !st.Success() {
		how := fmt.Sprintf("exit %d", st.Code)
		if st.Signal != "" {
			how = st.Signal
		}
		return core.Errorf(core.EUnavailable, "bwrap: the trial sandbox's program failed (%s): %s", how, oneLine(out.String()))
	}
	return nil
}

// firstLine is b's first line, or a placeholder when b is empty.
func firstLine(b []byte) string {
	if line, _, _ := bytes.Cut(b, []byte("\n")); len(line) > 0 {
		return string(line)
	}
	return "bwrap failed without a message"
}

// namespaceArgs are the bwrap options that make the namespaces and the
// identity inside. The network namespace is the sandbox's own: bwrap's,
// or with shareNet the one the daemon made for the outer bwrap (see
// ownNamespaces), which userNet connects to the outside. No capability
// is left in the sandbox's bounding set (bwrap keeps it full when it
// runs as uid 0 of the daemon's user namespace).
func (p *Provider) namespaceArgs(shareNet bool) []string {
	a := []string{"--unshare-all"}
	if shareNet {
		a = append(a, "--share-net")
	}
	return append(a, "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
		"--die-with-parent", "--new-session",
		"--uid", fmt.Sprint(p.uid), "--gid", fmt.Sprint(p.gid),
		"--hostname", "berth",
	)
}

// ownsNet reports whether the provider makes the network namespace of a
// sandbox with network itself, rather than bwrap: when the daemon is not
// root (see userNet).
func (p *Provider) ownsNet() bool { return !p.dropping() }

// ownNamespaces makes the outer bwrap start in a user namespace of the
// daemon's own, where the daemon's uid and gid are 0 (setgroups denied),
// and a network namespace owned by it: slirp4netns, unprivileged, may act
// on that network namespace as uid 0 of its owner (see userNet).
func ownNamespaces(attr *syscall.SysProcAttr) {
	attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	attr.GidMappingsEnableSetgroups = false
}

// Open checks cfg and prepares the sandbox's filesystem. The workspace,
// and the home when set, must be existing absolute directories other than
// "/"; each bind
// needs an existing absolute Source and an absolute Target ("" means the
// Source's path), not "/" (EInvalid otherwise). When OpenFiles is limited,
// util-linux prlimit must be installed (EUnavailable otherwise). Open
// starts nothing.
func (p *Provider) Open(ctx context.Context, cfg core.SandboxConfig) (core.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkDir("workspace", cfg.Workspace); err != nil {
		return nil, err
	}
	if cfg.Home != "" {
		if err := checkDir("home", cfg.Home); err != nil {
			return nil, err
		}
	}
	user := []mount{{kind: rwBind, src: cfg.Workspace, dst: filepath.Clean(cfg.Workspace), user: true}}
	if cfg.Home != "" {
		user = append(user, mount{kind: rwBind, src: cfg.Home, dst: filepath.Clean(cfg.Home), user: true})
	}
	for i, b := range cfg.Binds {
		m, err := bindMount(b)
		if err != nil {
			return nil, core.WrapError(core.EInvalid, err, "bwrap: bind %d: %s", i, core.ErrorMessage(err))
		}
		user = append(user, m)
	}
	// The daemon's own files, inside the workspace or a bind, are covered
	// there; last, so that at the same depth the cover wins.
	for _, m := range boxutil.Masks(cfg) {
		if m.Dir {
			user = append(user, mount{kind: tmpfs, dst: m.Path})
		} else {
			user = append(user, mount{kind: roBind, src: os.DevNull, dst: m.Path})
		}
	}
	home := "/tmp"
	if cfg.Home != "" {
		home = filepath.Clean(cfg.Home)
	}
	s := &Sandbox{
		p:     p,
		cfg:   cfg,
		home:  home,
		procs: make(map[*Process]struct{}),
	}
	s.cfg.Env = maps.Clone(cfg.Env)
	if cfg.Network {
		if _, err := os.Stat(p.slirp); p.slirp == "" || err != nil {
			return nil, core.Errorf(core.EUnavailable, "bwrap: network needs slirp4netns (Debian package slirp4netns): the host's network is never shared")
		}
	}
	if cfg.Limits.OpenFiles > 0 {
		prlimit, err := exec.LookPath("prlimit")
		if err != nil {
			return nil, core.WrapError(core.EUnavailable, err, "bwrap: limiting open files needs prlimit (Debian package util-linux)")
		}
		s.prlimit = prlimit
	}
	if p.dropping() {
		// Pinned without following a link on its path (a sandbox may
		// have planted one where the workspace was): chowned and bound
		// through this descriptor only, held until Close.
		ws, err := wsdir.OpenNoFollow(cfg.Workspace)
		if err != nil {
			return nil, core.WrapError(core.EInvalid, err, "bwrap: refusing the workspace: %s", err)
		}
		if err := p.giveToHostUID(cfg, ws); err != nil {
			_ = ws.Close()
			return nil, err
		}
		s.ws = ws
	}
	if err := s.makeCgroup(); err != nil {
		if s.ws != nil {
			_ = s.ws.Close()
		}
		return nil, err
	}
	s.passwd = fmt.Appendf(nil, "root:x:0:0:root:/root:/bin/sh\nberth:x:%d:%d:berth sandbox:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", p.uid, p.gid, home)
	s.group = fmt.Appendf(nil, "root:x:0:\nberth:x:%d:\nnogroup:x:65534:\n", p.gid)
	view := p.etcView
	for _, m := range user {
		if within(m.dst, "/etc") {
			// bwrap makes no mount point in the view, bound read-only:
			// this sandbox's /etc is made, its entries bound one by one.
			view = ""
		}
	}
	s.mounts = append(systemMounts(view),
		mount{kind: dataFile, fd: fdPasswd, dst: "/etc/passwd"},
		mount{kind: dataFile, fd: fdGroup, dst: "/etc/group"},
		mount{kind: procfs, dst: "/proc"},
		mount{kind: devfs, dst: "/dev"},
		// /tmp first: a workspace under the host's /tmp is then bound
		// on top of the sandbox's private one, not hidden by it.
		mount{kind: tmpfs, dst: "/tmp", size: cfg.Limits.TmpBytes},
		mount{kind: tmpfs, dst: "/var/tmp", size: cfg.Limits.TmpBytes},
	)
	if cfg.Network {
		s.mounts = append(s.mounts, mount{kind: dataFile, fd: fdResolv, dst: "/etc/resolv.conf"})
	}
	s.mounts = append(s.mounts, userMounts(user)...)
	s.mounts = append(s.mounts, mount{kind: remountRO, dst: "/"})
	if p.dropping() {
		st, staged, err := p.newStage(s.mounts, cfg.Workspace, s.ws, s.prlimit != "")
		if err != nil {
			if s.cgroup != nil {
				_ = s.cgroup.remove()
			}
			_ = s.ws.Close()
			return nil, err
		}
		s.stage, s.staged = st, staged
	}
	return s, nil
}

// makeCgroup makes the sandbox's cgroups for its pids and memory limits.
// A pids limit the host cannot enforce is left out (as documented); a
// memory limit never is: without a memory cgroup Open fails with
// EUnavailable saying why, rather than run the sandbox unbounded.
func (s *Sandbox) makeCgroup() error {
	lim := s.cfg.Limits
	pids := lim.Pids
	if !s.p.LimitsPids() {
		pids = 0
	}
	if lim.MemoryBytes > 0 {
		if err := s.p.LimitsMemory(); err != nil {
			return err
		}
	}
	if pids <= 0 && lim.MemoryBytes <= 0 {
		return nil
	}
	cg, err := newCgroup(pids, lim.MemoryBytes)
	if err != nil {
		return core.WrapError(core.EUnavailable, err, "bwrap: cannot make the sandbox's cgroup: %s", err)
	}
	s.cgroup = cg
	return nil
}

// bindMount checks one of the caller's binds.
func bindMount(b core.Bind) (mount, error) {
	if !filepath.IsAbs(b.Source) {
		return mount{}, core.Errorf(core.EInvalid, "the source must be an absolute path")
	}
	if _, err := os.Stat(b.Source); err != nil {
		return mount{}, core.WrapError(core.EInvalid, err, "the source does not exist")
	}
	target := b.Target
	if target == "" {
		target = b.Source
	}
	if !filepath.IsAbs(target) {
		return mount{}, core.Errorf(core.EInvalid, "the target must be an absolute path")
	}
	target = filepath.Clean(target)
	if target == "/" {
		return mount{}, core.Errorf(core.EInvalid, "the target cannot be /")
	}
	kind := roBind
	if b.Writable {
		kind = rwBind
	}
	return mount{kind: kind, src: b.Source, dst: target, user: true}, nil
}

// checkDir is boxutil.CheckDir, and refuses the root directory too (it
// would bind the whole host).
func checkDir(role, dir string) error {
	if err := boxutil.CheckDir("bwrap", role, dir); err != nil {
		return err
	}
	if filepath.Clean(dir) == "/" {
		return core.Errorf(core.EInvalid, "bwrap: the %s cannot be the root directory", role)
	}
	return nil
}
