// Package relay runs an agent inside an isolating sandbox with the model
// gateway on the sandbox's own loopback (docs/api.md, The model gateway):
// `berth agent-exec --gateway-listen 127.0.0.1:PORT --gateway-socket PATH
// -- PROGRAM ARGS…` listens on the loopback address, starts the agent as
// its child with the same standard input, output and error (inherited:
// nothing is copied), relays each TCP connection to the Unix socket the
// daemon serves the session's gateway on (bound into the sandbox), passes
// SIGINT, SIGTERM and SIGHUP on to the agent, and exits as the agent did.
// With `--egress-listen ADDR --egress-socket PATH` it relays a second
// loopback port the same way, to the session's egress proxy (docs/api.md,
// Network policy).
//
// It stays in the agent's process group, in the sandbox: it outlives a
// daemon restart with its agent, and the next daemon serves the socket
// again at the same path, which each new connection dials afresh. It
// lives as long as the agent, one per session, so it links no net
// (internal/rawsock: the listen address is an IPv4 literal) and a plain
// berth build enters it before the daemon's libraries are initialised
// (cmd/berth/internal/childentry).
package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/rawsock"
)

// The gateway's flags' defaults: where an agent calls the model gateway,
// and the socket the daemon serves it on, as `berth agent-exec` takes
// them when not told.
const (
	DefaultListen = "127.0.0.1:41400"
	DefaultSocket = "/run/berth-gw/s"
)

// DefaultEgressListen is where a session with a network allow list finds
// its egress proxy, on the sandbox's own loopback (the daemon passes it
// to `berth agent-exec --egress-listen`).
const DefaultEgressListen = "127.0.0.1:41401"

// Options are what Run relays and runs.
type Options struct {
	// Listen is the loopback TCP address the agent calls the gateway at.
	Listen string
	// Socket is the Unix socket the daemon serves the gateway on.
	Socket string
	// EgressListen and EgressSocket are the egress proxy's loopback
	// address and socket, both empty when the session has no allow list.
	EgressListen, EgressSocket string
	// Argv is the agent's program and arguments.
	Argv []string
	// Stderr receives the relay's own complaints.
	Stderr io.Writer
}

// Run relays until the agent exits and returns the exit code to exit
// with; an agent killed by a signal has the relay re-raise it (Run
// returns 128+signal only if that does not end the process).
func Run(o Options) int {
	if len(o.Argv) == 0 {
		fmt.Fprintln(o.Stderr, "berth agent-exec: no program to run")
		return 2
	}
	r := &relay{conns: map[*rawsock.Conn]bool{}}
	var lns []*rawsock.Listener
	for _, p := range []struct{ listen, socket, what string }{
		{o.Listen, o.Socket, "the model gateway"}, {o.EgressListen, o.EgressSocket, "the egress proxy"},
	} {
		if p.listen == "" {
			continue
		}
		ln, err := rawsock.ListenTCP4(p.listen)
		if err != nil {
			// The agent runs all the same: it finds no gateway, or no way out.
			fmt.Fprintf(o.Stderr, "berth agent-exec: %s is not served to this agent: %v\n", p.what, err)
			continue
		}
		lns = append(lns, ln)
		r.wg.Add(1)
		go r.accept(ln, p.socket)
	}
	cmd := exec.Command(o.Argv[0], o.Argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		signal.Stop(sigs)
		r.close(lns)
		fmt.Fprintf(o.Stderr, "berth agent-exec: %v\n", err)
		return 127
	}
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	_ = cmd.Wait() // its status is ProcessState's
	signal.Stop(sigs)
	close(sigs)
	<-forwarded
	r.close(lns)
	return exitCode(cmd.ProcessState)
}

// exitCode is how the relay ends for an agent that ended as st: with its
// code, or its signal raised again.
func exitCode(st *os.ProcessState) int {
	if st == nil {
		return 127
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return st.ExitCode()
	}
	sig := ws.Signal()
	dieOf(sig)
	// The signal arrives on a thread of its own: it ends the process
	// while this waits.
	time.Sleep(time.Second)
	return 128 + int(sig)
}

// acceptBackoff is how long the relay waits after a failed accept.
const acceptBackoff = 50 * time.Millisecond

// relay forwards the loopback's connections to the sockets.
type relay struct {
	wg sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[*rawsock.Conn]bool
}

// accept relays each connection on ln to socket until ln closes.
func (r *relay) accept(ln *rawsock.Listener, socket string) {
	defer r.wg.Done()
	for {
		c, err := ln.Accept()
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, most likely: the agent holds them. The
			// relay waits a little rather than spin.
			time.Sleep(acceptBackoff)
			continue
		}
		if !r.track(c) {
			_ = c.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(c)
			r.pipe(c, socket)
		}()
	}
}

// pipe joins c to a new connection to socket, both ways.
func (r *relay) pipe(c *rawsock.Conn, socket string) {
	u, err := rawsock.Dial(context.Background(), socket)
	if err != nil {
		// The daemon is away (restarting): the agent's SDK retries.
		return
	}
	if !r.track(u) {
		_ = u.Close()
		return
	}
	defer r.untrack(u)
	// Whichever side ends first ends both: an HTTP connection is not
	// half-closed, and the agent's SDK opens another.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(u, c)
		_ = c.Close()
		_ = u.Close()
	}()
	_, _ = io.Copy(c, u)
	_ = c.Close()
	_ = u.Close()
	<-done
}

// track adds c to the connections close cuts; false once closed.
func (r *relay) track(c *rawsock.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = true
	return true
}

// untrack closes c and forgets it.
func (r *relay) untrack(c *rawsock.Conn) {
	_ = c.Close()
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// close stops listening, cuts every connection and waits for the
// goroutines.
func (r *relay) close(lns []*rawsock.Listener) {
	for _, ln := range lns {
		_ = ln.Close()
	}
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
