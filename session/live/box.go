package live

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// box is where the session's agent runs and what the daemon runs beside
// it: the sandbox provider and the sandbox's config, the shim's socket
// and reference to its sandbox when the agent runs in a shim, and the
// sandbox the daemon opens for terminals and exec (with a shim the
// agent's own sandbox is the shim's, and the daemon's is opened only when
// they are asked for). provider, cfg, program, ref and socket are set on
// the one path to live (Launch, start, New for a reattached session)
// before anything reads them.
type box struct {
	ls       *Session
	provider berth.SandboxProvider
	cfg      berth.SandboxConfig
	// program is the path the agent's command starts from in its
	// sandbox, set with cfg by Launch.
	program string
	// args are the program's arguments when they are not the agent
	// spec's (the agent runs under a program of berth's), set with it.
	args []string
	// beside is what a command beside the agent runs under
	// (AgentStart.Beside), set with cfg.
	beside []string
	// ref names the shim's sandbox, socket is the shim's socket.
	ref    string
	socket string

	// mu guards the fields below (the lock order is written on Session).
	mu      sync.Mutex
	sandbox berth.Sandbox
	// closed is set once the session is torn down: nothing opens sandbox
	// any more.
	closed bool
}

// argv is the arguments the agent's program starts with.
func (b *box) argv() []string {
	if b.args != nil {
		return b.args
	}
	return b.ls.spec.Args
}

// besideArgv is the path and arguments that run path with args beside
// the agent: under b.beside when it is set.
func (b *box) besideArgv(path string, args []string) (string, []string) {
	if len(b.beside) == 0 {
		return path, args
	}
	return b.beside[0], append(append(append([]string(nil), b.beside[1:]...), path), args...)
}

// launch starts the agent: in a shim when the manager has them, else
// as the daemon's own child in a sandbox it opens then. A shim has its
// job when launch returns; wait returns the agent once it runs. base is
// the stream offset of the agent's first stdout byte; the shim writes
// input to the agent's stdin first, then on its answer (see
// shim.Config.Input and Then).
func (b *box) launch(ctx context.Context, base int64, input, then []byte) (wait func() (berth.Process, *berth.Failure)) {
	ls := b.ls
	h := ls.h
	if so := h.Shim; so != nil {
		bundle := shim.NewBundle(h.RunDir, ls.id, randomHex(4))
		if len(bundle.Socket) > shim.MaxSocketPath {
			return failed(&berth.Failure{Kind: berth.FailStartup, Message: fmt.Sprintf("the shim socket path %s is too long for a Unix socket: use a shorter BERTH_HOME", bundle.Socket)})
		}
		b.socket = bundle.Socket
		job := shim.Config{SessionID: ls.id, Provider: b.provider.Name(), Bundle: bundle, Token: h.ShimToken(ls.id, bundle.Socket),
			Sandbox: b.cfg, Command: shim.Command{Path: b.program, Args: b.argv()},
			Linger: so.Linger, Orphan: so.Orphan, Base: base, Input: input, Then: then,
			MaxLineBytes: h.Limits.MaxLineBytes, MaxTurnOutput: h.Limits.MaxTurnOutput}
		given, err := h.Launcher.Give(ctx, job)
		if err != nil {
			return failed(b.startFailure(shim.Ready{}, err))
		}
		return func() (berth.Process, *berth.Failure) {
			p, ready, err := given.Wait(ctx)
			if err != nil {
				return nil, b.startFailure(ready, err)
			}
			b.ref = ready.Ref
			// The supervisor may look at the live session already.
			ls.mu.Lock()
			ls.shim = p
			ls.mu.Unlock()
			return p, nil
		}
	}
	return func() (berth.Process, *berth.Failure) {
		sb, err := b.provider.Open(ctx, b.cfg)
		if err != nil {
			return nil, &berth.Failure{Kind: berth.FailSandbox, Message: berth.ErrorMessage(err)}
		}
		proc, err := sb.Start(ctx, berth.ProcSpec{Path: b.program, Args: b.argv()})
		if err != nil {
			_ = sb.Close(ctx)
			return nil, &berth.Failure{Kind: berth.FailStartup, Message: fmt.Sprintf("start agent %s: %s", ls.spec.Name, berth.ErrorMessage(err))}
		}
		b.mu.Lock()
		b.sandbox = sb
		b.mu.Unlock()
		return proc, nil
	}
}

// startFailure is why a shim could not run the agent: the sandbox's
// (when it failed to open) or the start's.
func (b *box) startFailure(ready shim.Ready, err error) *berth.Failure {
	if ready.Stage == "sandbox" {
		return &berth.Failure{Kind: berth.FailSandbox, Message: berth.ErrorMessage(err)}
	}
	return &berth.Failure{Kind: berth.FailStartup, Message: fmt.Sprintf("start agent %s: %s", b.ls.spec.Name, berth.ErrorMessage(err))}
}

// failed is a launch's wait that has only f to say.
func failed(f *berth.Failure) func() (berth.Process, *berth.Failure) {
	return func() (berth.Process, *berth.Failure) { return nil, f }
}

// open returns the sandbox the daemon runs terminals and execs in, opening
// it on first use when the agent runs in a shim: the same container the
// shim made (docker), or a sandbox of the same shape (bwrap, host).
func (b *box) open(ctx context.Context) (berth.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sandbox != nil {
		return b.sandbox, nil
	}
	if b.closed {
		return nil, berth.Errorf(berth.EConflict, "the session is stopping")
	}
	var sb berth.Sandbox
	var err error
	if r, ok := b.provider.(berth.SandboxReopener); ok && b.ref != "" {
		sb, err = r.Reopen(ctx, b.cfg, b.ref)
	} else {
		sb, err = b.provider.Open(ctx, b.cfg)
	}
	if err != nil {
		return nil, err
	}
	b.sandbox = sb
	return sb, nil
}

// close releases the daemon's sandbox, if it opened one; nothing opens
// it afterwards.
func (b *box) close(ctx context.Context) {
	ls := b.ls
	b.mu.Lock()
	sb := b.sandbox
	b.closed = true
	b.mu.Unlock()
	if sb == nil {
		return
	}
	if err := sb.Close(ctx); err != nil {
		ls.logger.Warn("sandbox close", "err", err)
	}
}

// fileOwner is the host uid and gid the agent's files belong to when
// they are not the daemon's: a root daemon whose sandbox runs the agent as
// another user (berth.SandboxFileOwner).
func (b *box) fileOwner() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	fo, is := b.provider.(berth.SandboxFileOwner)
	if !is {
		return 0, 0, false
	}
	return fo.FileOwner()
}

// shared reports whether the daemon's sandbox was reopened from the
// shim's (a container): it holds the agent, and stays when the daemon lets
// go of it.
func (b *box) shared() bool { return b.ref != "" }
