// Package demoagent is berth's deterministic ACP v1 agent ("berth agent-demo").
//
// It has no model: every line of a prompt is a command (echo, think, write,
// read, run, ask, sleep, flood, crash, hang, stderr, plan, usage, mcp) or plain
// text that is echoed back. Tests, benchmarks and first-time users drive it to
// exercise every part of the protocol a real coding agent uses. See README.md's
// tour for its prompt language and the command docs in commands.go.
package demoagent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// exit ends the process for the `crash` command; tests replace it.
var exit = os.Exit

// errHung is returned by everything that was blocked by `hang` once the
// agent is released (only tests release a hung agent).
var errHung = errors.New("demo agent is hung")

// options are knobs for in-package tests that Main does not expose.
type options struct {
	// release, when closed, unblocks a hung agent. Nil (Main) means a hung
	// agent stays hung until the process is killed.
	release <-chan struct{}
	// defaultStateDir is the state dir when --state-dir is not given.
	defaultStateDir string
}

// Main runs the demo agent over stdin/stdout until stdin closes; args are the CLI args after "agent-demo" (flags: --state-dir DIR, --no-load, --no-mcp-http, --no-controls, --require-auth, --fail-new). Returns the process exit code.
//
// Exit codes: 0 when stdin closed, 1 when the state dir cannot be created,
// 2 on a usage error. The `crash` command exits the process directly.
// After `hang`, Main does not return even when stdin closes: a hung agent
// has to be killed.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var opts options
	// Each berth session gives its agent a private HOME, so keeping the
	// history there makes session/load work across agent restarts.
	if home := os.Getenv("HOME"); home != "" {
		opts.defaultStateDir = filepath.Join(home, ".berth-demo")
	}
	return run(args, stdin, stdout, stderr, opts)
}

// run is Main with test options.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, opts options) int {
	errw := &lockedWriter{w: stderr}
	fs := flag.NewFlagSet("agent-demo", flag.ContinueOnError)
	fs.SetOutput(errw)
	stateDir := fs.String("state-dir", "", "directory where session histories are kept (default $HOME/.berth-demo; enables session/load across runs)")
	noLoad := fs.Bool("no-load", false, "do not offer session/load (an agent that cannot reopen a conversation)")
	noFork := fs.Bool("no-fork", false, "do not offer session/fork (an agent that cannot fork a conversation)")
	noMCPHTTP := fs.Bool("no-mcp-http", false, "do not offer MCP over HTTP (an agent with stdio MCP servers only)")
	noControls := fs.Bool("no-controls", false, "offer no modes, config options or commands (an agent without controls)")
	failNew := fs.Bool("fail-new", false, "answer session/new with an internal error whose data names the cause (an agent that cannot start)")
	requireAuth := fs.Bool("require-auth", false, "offer the auth method demo-login and answer session/new and prompts with auth_required until it is used")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *stateDir == "" {
		*stateDir = opts.defaultStateDir
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errw, "agent-demo: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *stateDir != "" {
		if err := os.MkdirAll(*stateDir, 0o700); err != nil {
			fmt.Fprintf(errw, "agent-demo: %v\n", err)
			return 1
		}
	}

	a := newAgent(*stateDir, stdout, errw, opts.release)
	a.noLoad = *noLoad
	a.noMCPHTTP = *noMCPHTTP
	a.noControls = *noControls
	a.requireAuth = *requireAuth
	a.failNew = *failNew
	a.noFork = *noFork
	// The SDK starts reading in its constructor, but SetLogger and a.conn
	// must be set before anything is read (SetLogger is not synchronized).
	ready := make(chan struct{})
	conn := acp.NewAgentSideConnection(a, a.out, &startReader{r: stdin, start: ready})
	// The SDK logs "connection closed" at info level; keep stderr for real problems.
	conn.SetLogger(slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn})))
	a.conn = conn
	close(ready)

	<-conn.Done()
	// Wait for in-flight handlers (prompts end quickly: their contexts are
	// cancelled by the SDK on disconnect), then close history files.
	a.shutdown()
	return 0
}

// startReader holds reads from r until start is closed.
type startReader struct {
	r     io.Reader
	start <-chan struct{}
}

// Read implements io.Reader.
func (s *startReader) Read(p []byte) (int, error) {
	<-s.start
	return s.r.Read(p)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// gatedWriter is the agent's stdout. It serializes whole JSON-RPC lines (the
// SDK writes each message with one Write call, and the flood fast path writes
// pre-encoded lines through the same lock) and stops all output once the
// agent is hung.
type gatedWriter struct {
	mu      sync.Mutex
	w       io.Writer
	hung    <-chan struct{}
	release <-chan struct{}
	// defaultStateDir is the state dir when --state-dir is not given.
	defaultStateDir string
}

// Write implements io.Writer.
func (g *gatedWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.hung:
		// Nothing leaves a hung agent; a nil release blocks forever.
		waitRelease(g.release)
		return 0, errHung
	default:
	}
	return g.w.Write(p)
}
