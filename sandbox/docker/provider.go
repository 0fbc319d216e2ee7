// Package docker is the sandbox provider that runs each session in a
// container of its own, through the Docker Engine API (the official Go
// client, github.com/moby/moby/client).
//
// One container per session, labelled berth.session=<id> and
// berth.managed=true: read-only root filesystem, a tmpfs /tmp, the
// workspace and the private HOME bind-mounted read-write at their own
// paths, the session's extra binds, every capability dropped,
// no-new-privileges, no network unless asked, memory, CPU and pid limits,
// and an unprivileged user that is no local user's (see identity: a root
// daemon's containers run as DefaultHostUID, or as DefaultUID mapped by
// the engine's user namespace; a non-root daemon's as itself). The static
// berth binary is bound read-only at /usr/local/bin/berth and the host's
// static busybox at /busybox.berth, so the demo agent and the
// container's own helpers run in any image.
//
// The container's first process (its init, pid 1) is a busybox shell that
// sleeps in a loop and, being pid 1, reaps the orphans agents leave behind.
// Each Sandbox.Start is an exec in that container, its stdio carried by
// the Engine's hijacked attach stream. See Process for pids and signals.
//
// berth never pulls: an image must be on the engine already, except the
// default image, which the provider builds itself from the host's static
// busybox (Debian's busybox-static) the first time it is needed.
package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/optx"
	"github.com/berth-sh/berth/internal/wsdir"
	"github.com/berth-sh/berth/sandbox/internal/boxutil"
)

// DefaultImage is the image sessions get when neither the session nor
// Options name one. The provider builds it from the host's busybox.
const DefaultImage = "berth-sandbox:local"

// DefaultHost is the engine endpoint when neither Options.Host nor
// DOCKER_HOST name one.
const DefaultHost = "unix:///var/run/docker.sock"

// DefaultUID is the user agents run as inside the container when a root
// daemon's engine maps a user namespace (dockerd --userns-remap).
const DefaultUID = 1000

// Labels put on every container the provider creates.
const (
	// LabelSession holds the session id.
	LabelSession = "berth.session"
	// LabelManaged marks a container as berth's: RemoveLeftovers removes
	// every container that has it.
	LabelManaged = "berth.managed"
	// LabelInstance holds Options.Instance, when set.
	LabelInstance = "berth.instance"
)

// Paths inside the container.
const (
	// BerthPath is where Options.Berth is bound read-only.
	BerthPath = "/usr/local/bin/berth"
	// HelperPath is where the host's static busybox is bound read-only:
	// a file at the image's root, so no directory the runtime makes for
	// the mount (whose mode is the engine's) stands between it and the
	// container's user (a remapped engine refused uid 42420 its stat). Its name begins
	// with "busybox", so busybox takes its first argument as the applet.
	HelperPath = "/busybox.berth"
)

// Options configure the provider. The zero value is usable.
type Options struct {
	// Host is the engine endpoint, DOCKER_HOST style
	// ("unix:///var/run/docker.sock", "tcp://127.0.0.1:2375"). Empty means
	// $DOCKER_HOST, else DefaultHost. The engine must run on this host:
	// workspaces are bind-mounted from the daemon's filesystem.
	Host string
	// Image is the default image (DefaultImage when empty). It is built
	// from the host's busybox when it is missing; any other missing image
	// is an error.
	Image string
	// Berth is the host path of a statically linked berth binary, bound
	// read-only at BerthPath in every container. Empty binds nothing.
	Berth string
	// Busybox is the host path of a statically linked busybox, bound at
	// HelperPath and used to build the default image. Empty looks for
	// /usr/bin/busybox and /bin/busybox; one that is missing or not static
	// is not used.
	Busybox string
	// UID and GID are the user processes run as in the container when the
	// daemon is root and the engine maps a user namespace, which gives
	// them subordinate ids on the host (DefaultUID when zero; GID defaults
	// to UID). Root is never used.
	UID, GID int
	// HostUID is the uid, and gid, processes run as when the daemon is
	// root and the engine maps no user namespace: the container's ids are
	// then the host's (DefaultHostUID when zero). A daemon that is not
	// root runs its containers as itself and uses neither.
	HostUID int
	// Limits are the default limits; a session's non-zero limits win, and
	// DefaultLimits fill what both leave at zero.
	Limits berth.SandboxLimits
	// ProbeTimeout bounds Probe's ping (3s when zero).
	ProbeTimeout time.Duration
	// Instance, when set, is put on every container as berth.instance and
	// narrows RemoveLeftovers to the containers that carry it: daemons (or
	// test runs) sharing one engine then leave each other's containers
	// alone.
	Instance string
}

// Provider makes docker sandboxes. It is safe for concurrent use.
type Provider struct {
	opts Options
	cli  *client.Client
	host string
	// helper is the host path of a static busybox, "" when none: found
	// when first needed (it reads an ELF header), not on the daemon's
	// way to its API.
	helper func() string

	// buildMu serialises image checks and builds, so that concurrent Opens
	// build the default image once.
	buildMu sync.Mutex
	// mu guards images.
	mu sync.Mutex
	// images are the ids of the images known to be on the engine, by the
	// name they were asked by.
	images map[string]string

	// whoMu guards who.
	whoMu sync.Mutex
	// who is who the sandboxes are, once the engine has told (identity).
	who *identity
}

var _ berth.SandboxProvider = (*Provider)(nil)

// New returns a provider for opts. It does not contact the engine (Probe
// does); it fails only for an endpoint the client cannot parse (EInvalid).
func New(opts Options) (*Provider, error) {
	host := opts.Host
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = DefaultHost
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	optx.Default(&opts.UID, DefaultUID)
	optx.Default(&opts.GID, opts.UID)
	optx.Default(&opts.HostUID, DefaultHostUID)
	optx.Default(&opts.ProbeTimeout, 3*time.Second)
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "docker: bad engine endpoint %q", host)
	}
	helper := sync.OnceValue(func() string { return findHelper(opts.Busybox) })
	return &Provider{opts: opts, cli: cli, host: host, helper: helper, images: map[string]string{}}, nil
}

// Name is "docker".
func (*Provider) Name() string { return berth.SandboxDocker }

// Capabilities implements berth.SandboxProvider: a container with a
// filesystem of its own (host paths do not hold), binds, limits.
func (*Provider) Capabilities() berth.SandboxCapabilities {
	return berth.SandboxCapabilities{Isolation: 1, Binds: true, Limits: true}
}

// Host is the engine endpoint the provider talks to.
func (p *Provider) Host() string { return p.host }

// Close releases the client's idle connections. Sandboxes already open
// must be closed first.
func (p *Provider) Close() error { return p.cli.Close() }

// Probe pings the engine within Options.ProbeTimeout and learns from it
// who the sandboxes will be (identity). Its error is EUnavailable and
// says which endpoint did not answer and why, or why its containers
// cannot be used (a rootless engine).
func (p *Provider) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.ProbeTimeout)
	defer cancel()
	if _, err := p.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		why := reason(ctx, err)
		if ctx.Err() != nil {
			why = fmt.Sprintf("no answer within %s", p.opts.ProbeTimeout)
		}
		if hint := socketHint(p.host, err); hint != "" {
			why = "permission denied" + hint
		}
		return berth.WrapError(berth.EUnavailable, err, "docker: no engine at %s: %s", p.host, why)
	}
	_, err := p.identity(ctx)
	return err
}

// socketHint says how to reach an engine whose Unix socket refused this
// user (EACCES): by the socket's group, as Docker's own packages grant it,
// or by another endpoint. "" for any other error.
func socketHint(host string, err error) string {
	path, ok := strings.CutPrefix(host, "unix://")
	// The client keeps only the words of a refused connect.
	refused := errors.Is(err, os.ErrPermission) || client.IsErrConnectionFailed(err) && strings.Contains(err.Error(), "permission denied")
	if !ok || !refused {
		return ""
	}
	group := "docker"
	var st syscall.Stat_t
	if syscall.Stat(path, &st) == nil {
		group = strconv.FormatUint(uint64(st.Gid), 10)
		if g, err := user.LookupGroupId(group); err == nil {
			group = g.Name
		}
	}
	return fmt.Sprintf(" (this user may not use the engine's socket: add it to the socket's group, %[1]s: usermod -aG %[1]s USER, then log in again; "+
		"that group is as good as root on this host; or point [sandbox.docker] host at an engine it may use)", group)
}

// reason shortens an engine error to its cause: "connection refused", "no
// answer in time", or the engine's own message.
func reason(ctx context.Context, err error) string {
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return "no answer in time"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// Open creates and starts the session's container. cfg.Workspace must be
// an existing absolute directory, and so must cfg.Home when set (EInvalid
// otherwise); the image must be on the engine or be the default image
// (EUnavailable otherwise).
//
// Host files must be usable by the container's user as the host sees it
// (see identity). When the daemon runs as root that is another uid, no
// local user's, and Open gives it cfg.Home (the session's private HOME,
// whole) and whatever belongs to root in the workspace and in writable
// binds; Start does the same for the directories from the workspace down
// to its Dir. Root keeps its access (it needs no ownership). Files of
// other users are left alone and must be usable by that uid already, and
// read-only binds are never changed: their sources must be readable by
// it. This happens once the container runs (its init does not need
// them), after a check, when its processes are visible here, that the
// engine runs the container's user as that very uid. A daemon that is not
// root runs the container as itself and changes nothing.
//
// The workspace's path must lead to its directory without a symbolic link
// (the session stores it resolved): one planted since is refused
// (EInvalid). The engine binds by path, so the path is walked again right
// before the container is created and, when the container's processes
// are visible here, the bind is checked to be that directory once it has
// started; a swap between that walk and the engine's own lookup goes
// unseen only on an engine whose processes this host cannot see.
func (p *Provider) Open(ctx context.Context, cfg berth.SandboxConfig) (berth.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	// The workspace pinned without following a link on its path (one a
	// sandbox planted where it was): checked and chowned through this
	// descriptor, and the engine's bind checked against it
	// (openContainer).
	ws, err := wsdir.OpenNoFollow(cfg.Workspace)
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "docker: refusing the workspace: %s", err)
	}
	defer ws.Close()
	// Refused before anything of it changes hands (or the engine is asked
	// for anything), on the pinned directory itself.
	if os.Geteuid() == 0 && !cfg.ManagedWorkspace {
		if err := wsdir.Check(ws, cfg.Workspace, "workspace", append([]int{p.opts.HostUID}, cfg.WorkspaceOwners...)); err != nil {
			return nil, err
		}
	}
	who, err := p.identity(ctx)
	if err != nil {
		return nil, err
	}
	image := cfg.Image
	if image == "" {
		image = p.opts.Image
	}
	sb, err := p.openContainer(ctx, cfg, image, who, ws)
	if err != nil {
		return nil, err
	}
	if who.give {
		if err := give(cfg, ws, who); err != nil {
			_ = sb.remove(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return sb, nil
}

// give gives who's host uid what the sandbox writes to: the session's
// private home, whole; in the workspace (through ws, pinned) and the
// writable binds, what belongs to root.
func give(cfg berth.SandboxConfig, ws *os.File, who identity) error {
	if cfg.Home != "" {
		if err := boxutil.ChownTree(cfg.Home, who.hostUID, who.hostGID, false, nil); err != nil {
			return berth.WrapError(berth.EInternal, err, "docker: cannot give the session's home to uid %d", who.hostUID)
		}
	}
	if err := boxutil.ChownTreeAt(ws, who.hostUID, who.hostGID, true, cfg.Hide); err != nil {
		return berth.WrapError(berth.EInternal, err, "docker: cannot give the workspace to uid %d", who.hostUID)
	}
	for i, b := range cfg.Binds {
		if !b.Writable {
			continue
		}
		if err := boxutil.ChownTree(b.Source, who.hostUID, who.hostGID, true, cfg.Hide); err != nil {
			return berth.WrapError(berth.EInternal, err, "docker: cannot give writable bind %d to uid %d", i, who.hostUID)
		}
	}
	return nil
}

// Reopen returns a handle on the running container ref (a container id)
// that another Open made for the same session: a shim runs the agent in
// it, the daemon its terminals and execs. ENotFound when the container is
// gone or belongs to another session; EUnavailable when it runs as another
// user than this provider's sandboxes.
func (p *Provider) Reopen(ctx context.Context, cfg berth.SandboxConfig, ref string) (berth.Sandbox, error) {
	info, err := p.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, berth.WrapError(berth.ENotFound, err, "docker: container %.12s is gone", ref)
		}
		return nil, berth.WrapError(berth.EUnavailable, err, "docker: cannot inspect container %.12s: %s", ref, reason(ctx, err))
	}
	c := info.Container
	if c.Config == nil || c.Config.Labels[LabelSession] != cfg.SessionID || c.State == nil || !c.State.Running {
		return nil, berth.Errorf(berth.ENotFound, "docker: container %.12s is not session %s's running sandbox", ref, cfg.SessionID)
	}
	who, err := p.identity(ctx)
	if err != nil {
		return nil, err
	}
	// A container made for another user (by a berth that ran them as uid
	// 1000) is not adopted: its files are not this user's.
	if c.Config.User != who.user() {
		return nil, berth.Errorf(berth.EUnavailable, "docker: container %.12s runs as %s, not %s: stop and resume the session", ref, c.Config.User, who.user())
	}
	return &Sandbox{p: p, id: c.ID, cfg: cfg, who: who, local: ownedBy(c.State.Pid, c.ID)}, nil
}

// RemoveLeftovers force-removes every container labelled berth.managed=true
// on the engine (and berth.instance=Options.Instance when that is set),
// running or not, except those of the sessions keep names, and returns how
// many it removed. The daemon calls it at boot, once it has reattached the
// sessions whose agents outlived the previous daemon: the others were left
// by a daemon that died.
func (p *Provider) RemoveLeftovers(ctx context.Context, keep map[string]bool) (int, error) {
	filters := make(client.Filters).Add("label", LabelManaged+"=true")
	if p.opts.Instance != "" {
		filters.Add("label", LabelInstance+"="+p.opts.Instance)
	}
	list, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return 0, berth.WrapError(berth.EUnavailable, err, "docker: cannot list leftover containers: %s", reason(ctx, err))
	}
	removed := 0
	var errs []error
	for _, c := range list.Items {
		if keep[c.Labels[LabelSession]] {
			continue
		}
		_, err := p.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			removed++
		case cerrdefs.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("remove %.12s: %w", c.ID, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, berth.WrapError(berth.EUnavailable, err, "docker: cannot remove %d leftover containers", len(errs))
	}
	return removed, nil
}

// FileOwner is the container's user as the host sees it, which owns what
// it writes, when the daemon is root and so gives it files (see
// identity); ok is false otherwise, and when the engine cannot say who
// that is (within Options.ProbeTimeout, the first time).
func (p *Provider) FileOwner() (uid, gid int, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.ProbeTimeout)
	defer cancel()
	who, err := p.identity(ctx)
	if err != nil || !who.give {
		return 0, 0, false
	}
	return who.hostUID, who.hostGID, true
}
