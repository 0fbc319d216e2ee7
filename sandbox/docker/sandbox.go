package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/syncx"
	"github.com/berth-sh/berth/internal/wsdir"
	"github.com/berth-sh/berth/sandbox/internal/boxutil"
)

// startAttempts bounds how many times Open makes and starts a container
// whose start the runtime failed (a while apart: 5.5 s in all).
const startAttempts = 6

// runtimeStartFailed reports whether err is the runtime failing to start a
// container's process, which a container made anew may not meet: under
// load an engine has been seen to fail it now and then (runc: "stat
// /busybox.berth: permission denied" for a path every other start finds),
// in bursts of a few seconds.
func runtimeStartFailed(err error) bool {
	return err != nil && strings.Contains(err.Error(), "OCI runtime create failed")
}

// closeTimeout bounds the removal of a container when Close's context has
// no deadline of its own, or has already ended.
const closeTimeout = 30 * time.Second

// Sandbox is one session's container.
type Sandbox struct {
	p   *Provider
	id  string // container id
	cfg berth.SandboxConfig
	// who is the container's user, inside and on the host.
	who identity
	// cov are the covers of hidden paths bound in, removed with the
	// container.
	cov *covers
	// local is set when the container's init was found in this host's
	// /proc: pids from the engine are then this host's pids.
	local bool

	mu      sync.Mutex
	closing bool // set by Close: no more Starts, and processes died with the container
	removed bool
	// procs counts the processes whose stream goroutine still runs.
	procs sync.WaitGroup
}

var _ berth.Sandbox = (*Sandbox)(nil)

// nameSafe is session with each character a container name may not hold
// ([^a-zA-Z0-9_.-]) made "_".
func nameSafe(session string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, session)
}

// containerName is "berth-<session>-<random>": readable in `docker ps`,
// unique even when a session is opened twice.
func containerName(session string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := nameSafe(session)
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		s = "session"
	}
	return "berth-" + s + "-" + hex.EncodeToString(b[:])
}

// openContainer creates and starts the container as who, from image
// (built first when it is the default image). A container that was
// created but could not start is removed, and so is one whose bind of the
// workspace turns out not to be ws, the directory Open pinned, or whose
// user is not who on the host.
func (p *Provider) openContainer(ctx context.Context, cfg berth.SandboxConfig, image string, who identity, ws *os.File) (*Sandbox, error) {
	ref, err := p.ensureImage(ctx, image, who)
	if err != nil {
		return nil, err
	}
	cov, err := makeCovers(cfg)
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "docker: cannot make the covers of the hidden paths")
	}
	cc, hc := p.containerSpec(cfg, ref, who, cov)
	opts := client.ContainerCreateOptions{Config: cc, HostConfig: hc, Name: containerName(cfg.SessionID)}
	kept := false
	defer func() {
		if !kept {
			_ = cov.remove()
		}
	}()
	if err := samePath(ws, cfg.Workspace); err != nil {
		return nil, err
	}
	created, err := p.cli.ContainerCreate(ctx, opts)
	if err != nil && cerrdefs.IsNotFound(err) && image == p.opts.Image {
		// The default image went away since we last saw it: build it again.
		p.forgetImage(image)
		if cc.Image, err = p.ensureImage(ctx, image, who); err != nil {
			return nil, err
		}
		opts.Name = containerName(cfg.SessionID)
		created, err = p.cli.ContainerCreate(ctx, opts)
	}
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			p.forgetImage(image)
			return nil, berth.WrapError(berth.EUnavailable, err, "docker: image %q is not on the engine", image)
		}
		return nil, berth.WrapError(berth.EUnavailable, err, "docker: cannot create the container: %s", reason(ctx, err))
	}
	sb := &Sandbox{p: p, id: created.ID, cfg: cfg, who: who, cov: cov}
	for attempt := 1; ; attempt++ {
		_, err := p.cli.ContainerStart(ctx, sb.id, client.ContainerStartOptions{})
		if err == nil {
			break
		}
		// A container made anew gets a few more tries (runtimeStartFailed).
		if attempt >= startAttempts || ctx.Err() != nil || !runtimeStartFailed(err) {
			sb.remove(context.WithoutCancel(ctx))
			return nil, berth.WrapError(berth.EUnavailable, err, "docker: cannot start the container: %s", reason(ctx, err))
		}
		slog.Warn("docker: the runtime did not start a container; making it again", "session_id", cfg.SessionID, "err", err)
		if _, err := p.cli.ContainerRemove(context.WithoutCancel(ctx), sb.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			sb.remove(context.WithoutCancel(ctx))
			return nil, berth.WrapError(berth.EUnavailable, err, "docker: cannot remove the container that did not start: %s", reason(ctx, err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt*attempt) * 100 * time.Millisecond):
		}
		if created, err = p.cli.ContainerCreate(ctx, opts); err != nil {
			return nil, berth.WrapError(berth.EUnavailable, err, "docker: cannot create the container: %s", reason(ctx, err))
		}
		sb.id = created.ID
	}
	if info, err := p.cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{}); err == nil && info.Container.State != nil {
		pid := info.Container.State.Pid
		sb.local = ownedBy(pid, created.ID)
		if sb.local {
			// What the engine bound must be the pinned directory.
			inside := fmt.Sprintf("/proc/%d/root%s", pid, cfg.Workspace)
			awaitLookable(ctx, inside)
			if !sameFile(ws, inside) {
				sb.remove(context.WithoutCancel(ctx))
				return nil, berth.Errorf(berth.EInvalid, "docker: refusing the workspace: %s is no longer the directory the sandbox opened (a symbolic link was planted on its path?)", cfg.Workspace)
			}
			// The files go to who's host uid: the engine must run the
			// container's user as that uid.
			if err := checkMapped(pid, who); err != nil {
				sb.remove(context.WithoutCancel(ctx))
				return nil, err
			}
		}
	}
	kept = true
	return sb, nil
}

// lookableWait bounds how long Open waits for the container's first
// process to become a daemon that is not root's to look into.
const lookableWait = 5 * time.Second

// awaitLookable waits while path, under a container process's root, is
// refused to this user, for lookableWait at most: until runc's init has
// exec'd the container's program it is not dumpable, and only root may
// look into it (a daemon that is not root runs its containers as itself).
func awaitLookable(ctx context.Context, path string) {
	deadline := time.Now().Add(lookableWait)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrPermission) || time.Now().After(deadline) {
			return
		}
		if !syncx.Sleep(ctx, delay) {
			return
		}
	}
}

// ownedBy reports whether host pid belongs to container id, from its
// cgroup as this host's /proc shows it. False when the pid is not visible
// (an engine in another pid namespace or on another machine).
func ownedBy(pid int, id string) bool {
	if pid <= 0 || id == "" {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && strings.Contains(string(b), id)
}

// ID is the container's id.
func (s *Sandbox) ID() string { return s.id }

// Ref is the container's id, for Provider.Reopen.
func (s *Sandbox) Ref() string { return s.id }

// Start runs spec in the container through an exec, as the sandbox's user
// (see identity), in a session and process group of its own (the runtime
// gives every exec one). Its environment is the session's env, HOME, then spec.Env (later
// entries win), over the image's. A spec.Path without "/" is looked up in the container's
// PATH. The working directory is spec.Dir (relative to the workspace when
// relative) or the workspace. ctx only bounds the start.
//
// Errors: EInvalid for a bad spec; EUnavailable when the sandbox is closed,
// the engine does not answer, or the program cannot be started (not found,
// not executable), with the runtime's reason.
func (s *Sandbox) Start(ctx context.Context, spec berth.ProcSpec) (berth.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if spec.Path == "" {
		return nil, berth.Errorf(berth.EInvalid, "docker: no program to start")
	}
	if err := boxutil.CheckInput("docker", spec); err != nil {
		return nil, err
	}
	for _, kv := range spec.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, berth.Errorf(berth.EInvalid, "docker: environment entry %q is not K=V", k)
		}
	}
	dir := s.cfg.Workspace
	if spec.Dir != "" {
		dir = spec.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.cfg.Workspace, dir)
		}
	}
	if s.who.give {
		if err := boxutil.ChownPath(s.cfg.Workspace, dir, s.who.hostUID, s.who.hostGID); err != nil {
			return nil, berth.WrapError(berth.EInternal, err, "docker: cannot give the working directory to uid %d", s.who.hostUID)
		}
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, berth.Errorf(berth.EUnavailable, "docker: sandbox is closed")
	}
	s.procs.Add(1)
	s.mu.Unlock()
	p, err := s.start(ctx, spec, dir)
	if err != nil {
		s.procs.Done()
		return nil, err
	}
	boxutil.WriteInput(p.Stdin(), spec)
	return p, nil
}

// Close removes the container, killing whatever still runs in it, and
// waits (within ctx) for its processes' streams to end. It does not touch
// the workspace or the home. It is idempotent; later Starts fail.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	if err := s.remove(ctx); err != nil {
		return err
	}
	return syncx.Wait(ctx, &s.procs)
}

// remove force-removes the container once. A container already gone is
// not an error.
func (s *Sandbox) remove(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok || ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
	}
	_, err := s.p.cli.ContainerRemove(ctx, s.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return berth.WrapError(berth.EUnavailable, err, "docker: cannot remove the container: %s", reason(ctx, err))
	}
	s.removed = true
	if err := s.cov.remove(); err != nil {
		return berth.WrapError(berth.EInternal, err, "docker: cannot remove the covers of the hidden paths")
	}
	return nil
}

// isClosing reports whether Close has begun.
func (s *Sandbox) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// samePath walks path again without following links and checks it still
// leads to the directory ws holds.
func samePath(ws *os.File, path string) error {
	f, err := wsdir.OpenNoFollow(path)
	if err == nil {
		defer f.Close()
		if !sameFile(ws, boxutil.ProcPath(f)) {
			err = fmt.Errorf("%s is no longer the directory the sandbox opened", path)
		}
	}
	if err != nil {
		return berth.WrapError(berth.EInvalid, err, "docker: refusing the workspace: %s", err)
	}
	return nil
}

// sameFile reports whether path (followed) is the file f holds.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}
