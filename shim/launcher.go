package shim

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/rawsock"
	"github.com/berth-sh/berth/internal/syncx"
)

// Launcher starts shims. It keeps Spare idle shims started ahead, each
// waiting for its job on stdin, so that starting a session does not wait
// for a process to start and initialise (the berth binary needs 20–30 ms).
//
// It may run more than one shim program (Program): the small berth-shim
// for the providers it knows, `berth shim` for the others. Each program has
// its own spares: the first program's from the start, another's once it
// has been used (a daemon that never starts a docker session keeps no
// spare of the program docker needs).
//
// Every shim runs in a session and process group of its own, so nothing
// done to the daemon reaches it. The daemon reaps the shims it started
// while it lives (one goroutine per shim, ending with it); init reaps
// those that outlive it.
type Launcher struct {
	// pools are the programs' pools, made at their first use from the
	// programs the launcher was given (which may wait for an install).
	pools  func() []*pool
	env    []string
	runDir string
	spare  int

	mu     sync.Mutex
	closed bool
	// done is closed by Close.
	done chan struct{}
	// refills counts the goroutines that start spares; Close waits for them.
	refills sync.WaitGroup
	// children counts the reapers of the shims started, each ending with
	// its shim; WaitChildren waits for them.
	children sync.WaitGroup
}

// Program is one shim program a launcher runs.
type Program struct {
	// Argv runs it; the job comes on its stdin.
	Argv []string
	// Providers are the sandbox providers it serves; none means all.
	Providers []string
}

// serves reports whether the program serves the provider called name.
func (p Program) serves(name string) bool {
	return len(p.Providers) == 0 || slices.Contains(p.Providers, name)
}

// pool is one program's idle shims, guarded by the launcher's mu.
type pool struct {
	Program
	idle []*spawned
	// warm says spares are kept: from the start for the first program,
	// after its first use for the others.
	warm bool
	// wake, while a refill of this pool waits out refillDelay, ends the
	// wait early (Replenish closes it).
	wake chan struct{}
	// expect is the sandbox provider of the last job given to a shim of
	// the pool, which its next spares prepare for (see EnvExpect).
	expect string
}

// refillDelay is how long after taking a spare the launcher starts the
// next one, unless Replenish says earlier that the agent it went to has
// started.
var refillDelay = 50 * time.Millisecond

// spawned is one shim process, idle until it is given a job.
type spawned struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// stdout is the read end of the shim's stdout, ours to close (not
	// exec's: its Wait would close it when the shim exits, maybe before
	// the ready line of a shim that failed was read).
	stdout *os.File
	// conn is the daemon's end of the connection made at the start (see
	// EnvConn), the launch's to attach on or to close.
	conn   *rawsock.Conn
	exited chan struct{}
}

// NewLauncher returns a launcher that runs programs (env added to the
// daemon's environment) for shims whose files are in runDir, keeping
// spare idle ones. A job goes to the first program that serves its
// provider.
func NewLauncher(programs []Program, env []string, runDir string, spare int) *Launcher {
	return NewLauncherFunc(func() []Program { return programs }, env, runDir, spare)
}

// NewLauncherFunc is NewLauncher with programs given by a function that
// is called once, when a shim is first needed (the first spare, after
// refillDelay, or the first Give): it may wait for a program to be
// installed without holding up whoever makes the launcher.
func NewLauncherFunc(programs func() []Program, env []string, runDir string, spare int) *Launcher {
	l := &Launcher{env: env, runDir: runDir, spare: spare, done: make(chan struct{})}
	// The first program's pool exists from the start, to keep spares
	// from the start; its program is filled in with the others'.
	first := &pool{warm: true}
	l.pools = sync.OnceValue(func() []*pool {
		ps := programs()
		if len(ps) == 0 {
			return nil
		}
		first.Program = ps[0]
		pools := []*pool{first}
		for _, p := range ps[1:] {
			pools = append(pools, &pool{Program: p})
		}
		return pools
	})
	l.refill(first)
	return l
}

// spawn starts one idle shim of p.
func (l *Launcher) spawn(p *pool) (*spawned, error) {
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// A shim lives on after the daemon: it must not keep the daemon's
	// working directory busy (an unmountable disk, a deleted checkout).
	cmd.Dir = l.runDir
	// One P is plenty for a relay, and a thousand idle shims wake cheaper.
	// Its end of the daemon's first connection is its descriptor 3.
	cmd.Env = append(append(os.Environ(), "GOMAXPROCS=1", EnvConn+"=3"), append(l.env, EnvRun+"="+l.runDir)...)
	l.mu.Lock()
	if p.expect != "" {
		cmd.Env = append(cmd.Env, EnvExpect+"="+p.expect)
	}
	l.mu.Unlock()
	conn, theirs, err := connPair()
	if err != nil {
		return nil, err
	}
	// The shim has its own copy once started; ours goes either way.
	defer theirs.Close()
	started := false
	defer func() {
		if !started {
			_ = conn.Close()
		}
	}()
	cmd.ExtraFiles = []*os.File{theirs}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, core.WrapError(core.EInternal, err, "shim: stdin")
	}
	stdout, w, err := os.Pipe()
	if err != nil {
		_ = stdin.Close()
		return nil, core.WrapError(core.EInternal, err, "shim: stdout")
	}
	cmd.Stdout = w
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		_ = stdout.Close()
		return nil, core.WrapError(core.EUnavailable, err, "shim: start")
	}
	started = true
	sp := &spawned{cmd: cmd, stdin: stdin, stdout: stdout, conn: conn, exited: make(chan struct{})}
	l.children.Add(1)
	go func() {
		defer l.children.Done()
		_ = cmd.Wait()
		close(sp.exited)
	}()
	return sp, nil
}

// connPair makes a connected pair of Unix stream sockets: ours for the
// daemon, theirs as a file for a shim to inherit.
func connPair() (*rawsock.Conn, *os.File, error) {
	ours, theirs, err := rawsock.Pair("shim")
	if err != nil {
		return nil, nil, core.WrapError(core.EUnavailable, err, "shim: socket pair")
	}
	return ours, theirs, nil
}

// refill starts spares of p in the background until there are enough.
func (l *Launcher) refill(p *pool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || !p.warm || len(p.idle) >= l.spare {
		return
	}
	if p.wake != nil {
		// A refill is waiting already.
		return
	}
	wake := make(chan struct{})
	p.wake = wake
	l.refills.Add(1)
	go func() {
		defer l.refills.Done()
		// A spare started at once would compete for the CPU with the agent
		// the last one just started, whose start-up is on a create's path.
		t := time.NewTimer(refillDelay)
		select {
		case <-t.C:
		case <-wake:
			t.Stop()
		case <-l.done:
			t.Stop()
			return
		}
		l.mu.Lock()
		if p.wake == wake {
			p.wake = nil
		}
		l.mu.Unlock()
		// The first refill may come before the programs are known.
		if len(l.pools()) == 0 {
			return
		}
		for {
			l.mu.Lock()
			if l.closed || len(p.idle) >= l.spare {
				l.mu.Unlock()
				return
			}
			l.mu.Unlock()
			sp, err := l.spawn(p)
			if err != nil {
				return
			}
			l.mu.Lock()
			if l.closed {
				l.mu.Unlock()
				retire(sp)
				return
			}
			p.idle = append(p.idle, sp)
			l.mu.Unlock()
		}
	}()
}

// Replenish tells the launcher that the agent of the shim last taken has
// started (its handshake is over): the spare that replaces it is started
// now rather than after refillDelay, so that the next create finds it.
func (l *Launcher) Replenish() {
	pools := l.pools()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range pools {
		if p.wake != nil {
			close(p.wake)
			p.wake = nil
		}
	}
}

// take returns an idle shim of the program that serves provider, or
// starts one.
func (l *Launcher) take(provider string) (*spawned, error) {
	pools := l.pools()
	i := slices.IndexFunc(pools, func(p *pool) bool { return p.serves(provider) })
	if i < 0 {
		return nil, core.Errorf(core.EInternal, "shim: no shim program serves the sandbox provider %q", provider)
	}
	p := pools[i]
	l.mu.Lock()
	p.warm, p.expect = true, provider
	for len(p.idle) > 0 {
		sp := p.idle[0]
		p.idle = p.idle[1:]
		select {
		case <-sp.exited:
			_, _ = sp.stdout.Close(), sp.conn.Close()
			continue
		default:
		}
		l.mu.Unlock()
		l.refill(p)
		return sp, nil
	}
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, core.Errorf(core.EUnavailable, "shim: the launcher is closed")
	}
	defer l.refill(p)
	return l.spawn(p)
}

// retire ends an idle shim: without a job it exits at the end of its stdin.
func retire(sp *spawned) {
	defer sp.stdout.Close()
	defer sp.conn.Close()
	_ = sp.stdin.Close()
	select {
	case <-sp.exited:
	case <-time.After(5 * time.Second):
		_ = sp.cmd.Process.Kill()
		<-sp.exited
	}
}

// Close ends the idle shims and waits for them; shims that serve sessions
// are not touched.
func (l *Launcher) Close() {
	pools := l.pools()
	l.mu.Lock()
	if !l.closed {
		close(l.done)
	}
	l.closed = true
	var idle []*spawned
	for _, p := range pools {
		idle = append(idle, p.idle...)
		p.idle = nil
	}
	l.mu.Unlock()
	l.refills.Wait()
	for _, sp := range idle {
		retire(sp)
	}
}

// WaitChildren waits until every shim this launcher started has exited
// and been reaped, or ctx ends: for a daemon that stopped all its sessions.
func (l *Launcher) WaitChildren(ctx context.Context) error { return syncx.Wait(ctx, &l.children) }

// Launch gives cfg to a shim and attaches to it from cfg.Base once it
// runs the agent. The shim logs to cfg.Log.
func (l *Launcher) Launch(ctx context.Context, cfg Config) (*Proc, Ready, error) {
	g, err := l.Give(ctx, cfg)
	if err != nil {
		return nil, Ready{}, err
	}
	return g.Wait(ctx)
}

// Given is a job a shim has taken: it starts the agent while the caller
// goes on, and Wait attaches once it runs.
type Given struct {
	cfg      Config
	sp       *spawned
	werr     error
	attached chan attachResult
	readyc   chan Ready
}

// attachResult is the attach on a shim's first connection.
type attachResult struct {
	p   *Proc
	err error
}

// Give hands cfg to a shim (a spare, or one started now) and returns as
// soon as it has it. The caller must Wait, which ends what a failed
// launch leaves.
func (l *Launcher) Give(ctx context.Context, cfg Config) (*Given, error) {
	job, err := json.Marshal(cfg)
	if err != nil {
		return nil, core.WrapError(core.EInternal, err, "shim: encode job")
	}
	sp, err := l.take(cfg.Provider)
	if err != nil {
		return nil, err
	}
	g := &Given{cfg: cfg, sp: sp, attached: make(chan attachResult, 1), readyc: make(chan Ready, 1)}
	_, g.werr = sp.stdin.Write(job)
	_ = sp.stdin.Close()
	// The attach request goes on the connection made at the shim's start
	// (see EnvConn): the shim answers it with its hello once the agent
	// runs, right after its ready line, with no socket to dial.
	go func() {
		p, err := attachOn(ctx, sp.conn, cfg.Base)
		g.attached <- attachResult{p, err}
	}()
	go func() {
		defer sp.stdout.Close()
		var rd Ready
		if err := json.NewDecoder(sp.stdout).Decode(&rd); err != nil {
			rd.Error = "the shim exited before it was ready (see " + cfg.Log + ")"
			rd.Code = core.EInternal
		}
		g.readyc <- rd
	}()
	return g, nil
}

// Wait waits until the shim runs the agent (or says why it cannot) and
// attaches to it.
func (g *Given) Wait(ctx context.Context) (*Proc, Ready, error) {
	sp, cfg := g.sp, g.cfg
	// dropAttach ends the connection of a launch that failed.
	dropAttach := func() {
		_ = sp.conn.Close()
		if r := <-g.attached; r.p != nil {
			r.p.Detach()
		}
	}
	var rd Ready
	select {
	case rd = <-g.readyc:
	case <-ctx.Done():
		_ = sp.cmd.Process.Kill()
		dropAttach()
		return nil, Ready{}, core.WrapError(core.EUnavailable, ctx.Err(), "shim: not ready")
	}
	if rd.Error != "" || g.werr != nil {
		<-sp.exited
		dropAttach()
		if rd.Error == "" {
			rd.Error = g.werr.Error()
		}
		code := rd.Code
		if code == "" {
			code = core.EInternal
		}
		return nil, rd, core.Errorf(code, "%s", rd.Error)
	}
	// A shim that said it is ready answers the attach at once; one that
	// does not (it did not take the connection) must not hold the create.
	hello := time.NewTimer(helloTimeout)
	defer hello.Stop()
	var r attachResult
	select {
	case r = <-g.attached:
	case <-hello.C:
		dropAttach()
		r.err = core.Errorf(core.EUnavailable, "shim: no hello within %v of its ready line", helloTimeout)
	}
	if r.err != nil {
		KillAgent(rd.AgentPID, cfg.SessionID)
		_ = sp.cmd.Process.Kill()
		return nil, rd, r.err
	}
	return r.p, rd, nil
}

// helloTimeout bounds the wait for a shim's hello once its ready line
// is in.
var helloTimeout = 10 * time.Second
