package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/internal/rawsock"
)

// EnvRun is the environment variable that holds, in a shim's own
// environment, the run directory of the daemon that started it: a later
// daemon finds its shims by it.
const EnvRun = "BERTH_SHIM_RUN"

// EnvConn names, in a shim's environment, the descriptor of the
// connection its launcher made to it when it started it (one end of a
// socket pair): the daemon attaches there to the agent the shim is given,
// with no dial to wait for the shim's socket.
const EnvConn = "BERTH_SHIM_CONN"

// EnvExpect names, in a spare shim's environment, the sandbox provider
// of the job its launcher expects it to get: that of the last job given
// to a shim of its program. A spare makes ahead what a sandbox of that
// provider needs (a bwrap sandbox's cgroups, stage and view of /etc),
// and nothing for another; unset, it makes them all.
const EnvExpect = "BERTH_SHIM_EXPECT"

// ErrDetached is what Wait returns once the daemon has let go of the shim
// on purpose: the agent runs on.
var ErrDetached = errors.New("shim: detached")

// ErrLost is what Wait returns when the shim went away without reporting
// the agent's exit.
var ErrLost = errors.New("shim: connection to the shim lost")

// Proc is the daemon's side of one shim: a core.Process whose stdio
// travels over the shim's socket.
type Proc struct {
	hello Hello
	nc    *rawsock.Conn

	wmu      sync.Mutex
	deadline time.Time

	stdout, stderr *io.PipeReader
	outW, errW     *io.PipeWriter

	mu       sync.Mutex
	status   *core.ExitStatus
	err      error
	detached bool
	done     chan struct{}
	reader   chan struct{}
}

var _ core.Process = (*Proc)(nil)

// Attach connects to the shim listening on socket and asks for the
// agent's stdout from offset from. EUnavailable when no shim answers.
func Attach(ctx context.Context, socket string, from int64) (*Proc, error) {
	nc, err := rawsock.Dial(ctx, socket)
	if err != nil {
		return nil, core.WrapError(core.EUnavailable, err, "shim: connect")
	}
	return attachOn(ctx, nc, from)
}

// attachOn is Attach over a connection made: it asks for the agent's
// stdout from offset from and reads the shim's hello.
func attachOn(ctx context.Context, nc *rawsock.Conn, from int64) (*Proc, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	req, _ := json.Marshal(attachRequest{From: from})
	if _, err := nc.Write(appendFrame(nil, frameAttach, req)); err != nil {
		_ = nc.Close()
		return nil, core.WrapError(core.EUnavailable, err, "shim: attach")
	}
	// Small: a frame bigger than the buffer is read straight into its own.
	r := bufio.NewReaderSize(nc, 4<<10)
	typ, payload, err := readFrameMax(r, maxHello)
	if err != nil || typ != frameHello {
		_ = nc.Close()
		if err == nil {
			err = fmt.Errorf("unexpected frame %q", typ)
		}
		return nil, core.WrapError(core.EUnavailable, err, "shim: hello")
	}
	_ = nc.SetDeadline(time.Time{})
	p := &Proc{nc: nc, done: make(chan struct{}), reader: make(chan struct{})}
	if err := json.Unmarshal(payload, &p.hello); err != nil {
		_ = nc.Close()
		return nil, core.WrapError(core.EUnavailable, err, "shim: hello")
	}
	p.stdout, p.outW = io.Pipe()
	p.stderr, p.errW = io.Pipe()
	go p.read(r)
	return p, nil
}

// keptFrame is the largest frame buffer a connection keeps between frames.
const keptFrame = 64 << 10

// Hello is what the shim said when the daemon attached.
func (p *Proc) Hello() Hello { return p.hello }

// read takes the shim's frames apart until the exit or the end of the
// connection.
func (p *Proc) read(r *bufio.Reader) {
	defer close(p.reader)
	var status *core.ExitStatus
	// stderr must never hold up stdout: a reader that lags loses some. Its
	// writer starts with the first stderr frame (most agents write none).
	var errc chan []byte
	errDone := make(chan struct{})
	// Once nobody reads stdout, its frames are dropped: the exit that
	// follows them is still seen.
	discard := false
	// Stdout frames (64 KiB from the shim's spool) are read into one buffer:
	// the pipe's Write returns only once its reader has copied them. It
	// grows, by powers of two, to the largest frame seen up to 64 KiB, so
	// an idle session's is small.
	var buf []byte
	for !p.isDetached() {
		typ, payload, err := readFrameInto(r, maxFrame, buf)
		if err != nil {
			break
		}
		if n := len(payload); n > cap(buf) && cap(buf) < keptFrame {
			buf = make([]byte, 0, min(keptFrame, 1<<bits.Len(uint(n-1))))
		}
		switch typ {
		case frameStdout:
			if !discard {
				if _, err := p.outW.Write(payload); err != nil {
					discard = true
				}
			}
		case frameStderr:
			if errc == nil {
				errc = make(chan []byte, 64)
				go func() {
					defer close(errDone)
					for b := range errc {
						_, _ = p.errW.Write(b)
					}
				}()
			}
			select {
			case errc <- bytes.Clone(payload):
			default:
			}
		case frameExit:
			var st core.ExitStatus
			if json.Unmarshal(payload, &st) == nil {
				status = &st
			}
		}
		if status != nil {
			break
		}
	}
	_ = p.outW.Close()
	if errc != nil {
		close(errc)
		select {
		case <-errDone:
		case <-time.After(time.Second):
			// Nobody reads stderr: its writer gives up.
			_ = p.errW.Close()
			<-errDone
		}
	}
	_ = p.errW.Close()
	p.mu.Lock()
	switch {
	case status != nil:
		p.status = status
	case p.detached:
		p.err = ErrDetached
	default:
		p.err = ErrLost
	}
	p.mu.Unlock()
	close(p.done)
}

// send writes one frame to the shim. Nothing is sent once the daemon
// let go of the shim (Detach, MarkDetached).
func (p *Proc) send(typ byte, payload []byte) error {
	if p.isDetached() {
		return ErrDetached
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	// The ACP connection's deadline bounds its own writes to the agent,
	// never a control frame sent later.
	dl := time.Time{}
	if typ == frameStdin {
		dl = p.deadline
	}
	_ = p.nc.SetWriteDeadline(dl)
	var hdr [5]byte
	hdr[0] = typ
	hdr[1], hdr[2], hdr[3], hdr[4] = byte(len(payload)>>24), byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	_, err := p.nc.WriteBuffers(hdr[:], payload)
	return err
}

// Pid is the agent's pid, which is also its process group.
func (p *Proc) Pid() int { return p.hello.AgentPID }

// ShimPID is the shim's pid.
func (p *Proc) ShimPID() int { return p.hello.ShimPID }

// Stdin writes to the agent's stdin through the shim; each Write is one
// frame, so whole lines stay whole.
func (p *Proc) Stdin() io.WriteCloser { return stdinWriter{p} }

// Stdout is the agent's stdout from the attach offset.
func (p *Proc) Stdout() io.ReadCloser { return p.stdout }

// Stderr is the agent's stderr.
func (p *Proc) Stderr() io.ReadCloser { return p.stderr }

// Done is closed once Wait would return.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the agent's exit as the shim reports it. ErrDetached
// after Detach, ErrLost when the shim went away without a report.
func (p *Proc) Wait() (core.ExitStatus, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != nil {
		return *p.status, nil
	}
	return core.ExitStatus{Code: -1, Signal: "lost"}, p.err
}

// Signal sends sig to the agent's process group through the shim.
func (p *Proc) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return core.Errorf(core.EInvalid, "shim: %v is not a signal number", sig)
	}
	b, _ := json.Marshal(signalRequest{Signal: int(s)})
	return p.send(frameSignal, b)
}

// Stop asks the shim to stop the agent (TERM to its group, grace, KILL)
// and waits for the exit. A shim that is gone has its agent's group
// killed directly.
func (p *Proc) Stop(ctx context.Context, grace time.Duration) (core.ExitStatus, error) {
	b, _ := json.Marshal(stopRequest{GraceMillis: grace.Milliseconds()})
	if err := p.send(frameStop, b); err != nil && !p.isDetached() {
		KillAgent(p.hello.AgentPID, p.hello.SessionID)
	}
	select {
	case <-p.done:
		return p.Wait()
	case <-ctx.Done():
		return core.ExitStatus{}, ctx.Err()
	case <-time.After(grace + 10*time.Second):
		if p.isDetached() {
			return p.Wait()
		}
		// The shim does not answer: nothing of the agent may outlive the stop.
		KillAgent(p.hello.AgentPID, p.hello.SessionID)
		_ = syscall.Kill(p.hello.ShimPID, syscall.SIGKILL)
		_ = p.nc.Close()
		return p.Wait()
	}
}

// Ack tells the shim the daemon has durably processed stdout up to offset.
func (p *Proc) Ack(offset int64) error {
	b, _ := json.Marshal(ackRequest{Offset: offset})
	return p.send(frameAck, b)
}

// Release tells the shim the daemon has the exit status, so it may exit,
// and closes the connection.
func (p *Proc) Release() {
	_ = p.send(frameExitAck, nil)
	_ = p.nc.Close()
}

// KillAgent SIGKILLs process pid and its process group, but only if pid
// is a process of session sessionID on this host (BERTH_SESSION_ID in its
// environment): a pid from a remote engine or one reused since is left
// alone.
func KillAgent(pid int, sessionID string) {
	if sessionID == "" {
		return
	}
	procfs.KillIfEnv(pid, "BERTH_SESSION_ID="+sessionID, true)
}

// isDetached reports whether Detach was called.
func (p *Proc) isDetached() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.detached
}

// MarkDetached makes the Proc send nothing more to the shim (no signal,
// no stop, no stdin): the first step of Detach, for a caller that must
// stop its own timers before the connection closes.
func (p *Proc) MarkDetached() {
	p.mu.Lock()
	p.detached = true
	p.mu.Unlock()
}

// Detach lets go of the shim without touching the agent: the connection
// closes, Wait returns ErrDetached, and the shim goes on spooling for the
// next daemon.
func (p *Proc) Detach() {
	p.mu.Lock()
	p.detached = true
	p.mu.Unlock()
	_ = p.nc.Close()
	// Readers of stdout and stderr see the end; nothing more is delivered.
	_ = p.stdout.CloseWithError(ErrDetached)
	_ = p.stderr.CloseWithError(ErrDetached)
	<-p.reader
}

// Discard drops the agent's stdout and stderr from now on, for a caller
// that only wants the exit (Stop, Wait) of a shim it does not serve.
func (p *Proc) Discard() {
	_ = p.stdout.Close()
	_ = p.stderr.Close()
}

// stdinWriter frames writes to the agent's stdin.
type stdinWriter struct{ p *Proc }

// Write sends b as one frame.
func (w stdinWriter) Write(b []byte) (int, error) {
	if err := w.p.send(frameStdin, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// SetWriteDeadline bounds later writes.
func (w stdinWriter) SetWriteDeadline(t time.Time) error {
	w.p.wmu.Lock()
	w.p.deadline = t
	w.p.wmu.Unlock()
	return nil
}

// Close closes the agent's stdin, unless the daemon detached: then the
// agent keeps it for the next daemon.
func (w stdinWriter) Close() error {
	if w.p.isDetached() {
		return nil
	}
	select {
	case <-w.p.done:
		return nil
	default:
	}
	return w.p.send(frameCloseStdin, nil)
}
