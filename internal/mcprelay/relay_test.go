package mcprelay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-sh/berth"
	bhttp "github.com/berth-sh/berth/http"
	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/testenv"
)

// fakeTools are a session's tools: they record the calls, and wait_child
// blocks until its context ends or release is closed.
type fakeTools struct {
	mu      sync.Mutex
	calls   []string
	waiting chan struct{} // closed when a wait_child has started
	release chan struct{}
}

func newFakeTools() *fakeTools {
	return &fakeTools{waiting: make(chan struct{}), release: make(chan struct{})}
}

func (f *fakeTools) record(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeTools) SpawnChild(_ context.Context, a berth.SpawnChildArgs) (*berth.SpawnChildResult, error) {
	f.record("spawn " + a.Name)
	return &berth.SpawnChildResult{ChildID: "ses_kid", State: berth.StateActive}, nil
}
func (f *fakeTools) PromptChild(_ context.Context, a berth.PromptChildArgs) (*berth.PromptChildResult, error) {
	f.record("prompt " + a.ChildID)
	return &berth.PromptChildResult{Text: "hi"}, nil
}
func (f *fakeTools) WaitChild(ctx context.Context, a berth.WaitChildArgs) (*berth.WaitChildResult, error) {
	f.record("wait " + a.ChildID)
	close(f.waiting)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-f.release:
		return &berth.WaitChildResult{State: berth.StateActive}, nil
	}
}
func (f *fakeTools) ListChildren(context.Context) (*berth.ChildrenResult, error) {
	f.record("list")
	return &berth.ChildrenResult{Children: []berth.ChildInfo{{ChildID: "ses_kid", Name: "kid"}}}, nil
}
func (f *fakeTools) StopChild(_ context.Context, a berth.ChildArgs) (*berth.ChildInfo, error) {
	f.record("stop " + a.ChildID)
	return &berth.ChildInfo{ChildID: a.ChildID}, nil
}

// daemon serves the tools socket as the daemon does (the tools handler,
// credential "good"), keeping what each connection sent it.
type daemon struct {
	srv    *http.Server
	ln     net.Listener
	served chan struct{}

	mu    sync.Mutex
	conns []*spyConn
}

// startDaemon serves tools on sock.
func startDaemon(t *testing.T, sock string, tools berth.ChildTools) *daemon {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	open := func(token string) (berth.ChildTools, func(), error) {
		if token != "good" {
			return nil, nil, berth.Errorf(berth.EUnauthenticated, "the berth tools credential is not valid")
		}
		return tools, func() {}, nil
	}
	d := &daemon{srv: &http.Server{Handler: bhttp.NewToolsHandler(open, 0, "test", nil)}, ln: ln, served: make(chan struct{})}
	go func() {
		defer close(d.served)
		_ = d.srv.Serve(spyListener{ln, d})
	}()
	t.Cleanup(d.stop)
	return d
}

// stop ends the daemon and every connection it had, as a SIGKILL would.
func (d *daemon) stop() {
	_ = d.srv.Close()
	<-d.served
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		_ = c.Close()
	}
}

// sent is what connection i (from 0) sent the daemon.
func (d *daemon) sent(i int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i >= len(d.conns) {
		return ""
	}
	c := d.conns[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.in.String()
}

// spyListener keeps the daemon's connections.
type spyListener struct {
	net.Listener
	d *daemon
}

func (l spyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &spyConn{Conn: c}
	l.d.mu.Lock()
	l.d.conns = append(l.d.conns, sc)
	l.d.mu.Unlock()
	return sc, nil
}

// spyConn keeps what it reads.
type spyConn struct {
	net.Conn
	mu sync.Mutex
	in bytes.Buffer
}

func (c *spyConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	c.in.Write(b[:n])
	c.mu.Unlock()
	return n, err
}

// The MCP protocol versions the tests' agents speak: one with the
// initialize handshake, as today's agents, and the stateless one.
const (
	withInitialize = "2025-06-18"
	stateless      = ""
)

// agent runs a relay with o and connects an MCP client of the protocol
// version to its stdio.
func agent(t *testing.T, o Options, version string) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	o.In, o.Out = inR, outW
	done := make(chan error, 1)
	go func() {
		done <- Run(o)
		_ = outW.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx,
		&mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the relay ended with %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the relay did not end with its agent's stdin")
		}
	})
	return cs
}

// call calls tool and returns the result's text and whether it is an error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: content %+v", tool, res.Content)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

func socket(t *testing.T) string {
	return filepath.Join(testenv.ShortTempDir(t, "relay"), "s")
}

// The agent's calls reach the daemon's server through the relay and its
// answers come back: the tools are listed and called as that session.
func TestTheRelayCallsTheDaemonsServer(t *testing.T) {
	sock := socket(t)
	tools := newFakeTools()
	startDaemon(t, sock, tools)
	cs := agent(t, Options{Socket: sock, Token: "good"}, withInitialize)
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 5 {
		t.Fatalf("tools/list = %v, %v", list, err)
	}
	if text, isErr := call(t, cs, berth.ToolSpawnChild, map[string]any{"ttl_seconds": 60, "name": "kid"}); isErr || !strings.Contains(text, "ses_kid") {
		t.Fatalf("spawn_child = %q (error %v)", text, isErr)
	}
	if text, isErr := call(t, cs, berth.ToolListChildren, map[string]any{}); isErr || !strings.Contains(text, `"name":"kid"`) {
		t.Fatalf("list_children = %q (error %v)", text, isErr)
	}
	if text, isErr := call(t, cs, berth.ToolStopChild, map[string]any{"child_id": "ses_kid", "extra": 1}); !isErr || !strings.HasPrefix(text, "invalid_argument: ") {
		t.Fatalf("stop_child with an unknown argument = %q (error %v)", text, isErr)
	}
	tools.mu.Lock()
	defer tools.mu.Unlock()
	if got := strings.Join(tools.calls, ", "); got != "spawn kid, list" {
		t.Fatalf("the daemon's tools got %q", got)
	}
}

// A daemon that goes away and comes back is the same server to the
// agent: the relay dials the next one and replays the agent's initialize
// (under an id of its own, whose answer the agent never sees) and
// initialized before the agent's next call. An agent of the stateless
// protocol sent none: nothing is replayed.
func TestTheRelayOutlivesTheDaemon(t *testing.T) {
	for version, want := range map[string][]string{
		withInitialize: {"initialize berth-mcp-replay-2", "notifications/initialized", "tools/call"},
		stateless:      {"tools/call"},
	} {
		t.Run("protocol "+version, func(t *testing.T) {
			sock := socket(t)
			tools := newFakeTools()
			d := startDaemon(t, sock, tools)
			cs := agent(t, Options{Socket: sock, Token: "good"}, version)
			if _, isErr := call(t, cs, berth.ToolListChildren, map[string]any{}); isErr {
				t.Fatal("list_children failed")
			}
			d.stop()
			d = startDaemon(t, sock, tools)
			if text, isErr := call(t, cs, berth.ToolListChildren, map[string]any{}); isErr {
				t.Fatalf("list_children after the restart: %q", text)
			}
			if msgs := messages(t, d.sent(0)); strings.Join(msgs, "; ") != strings.Join(want, "; ") {
				t.Fatalf("the next daemon got %q, want %q", msgs, want)
			}
		})
	}
}

// messages are the methods (and a string id) of the JSON-RPC messages
// after an upgrade's head.
func messages(t *testing.T, sent string) []string {
	t.Helper()
	_, body, ok := strings.Cut(sent, "\r\n\r\n")
	if !ok {
		t.Fatalf("no upgrade in %q", sent)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		var m struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if id, ok := m.ID.(string); ok {
			out = append(out, m.Method+" "+id)
		} else {
			out = append(out, m.Method)
		}
	}
	return out
}

// A call in flight when the daemon goes away is answered at once as a
// tool error that says it may have been done; the next call goes to the
// next daemon.
func TestACallInFlightWhenTheDaemonGoesFails(t *testing.T) {
	sock := socket(t)
	tools := newFakeTools()
	defer close(tools.release)
	d := startDaemon(t, sock, tools)
	cs := agent(t, Options{Socket: sock, Token: "good"}, withInitialize)
	type answer struct {
		text  string
		isErr bool
	}
	got := make(chan answer, 1)
	go func() {
		text, isErr := call(t, cs, berth.ToolWaitChild, map[string]any{"child_id": "ses_kid", "timeout_seconds": 60})
		got <- answer{text, isErr}
	}()
	<-tools.waiting
	d.stop()
	select {
	case a := <-got:
		if !a.isErr || !strings.HasPrefix(a.text, "unavailable: the berth daemon went away during this call") {
			t.Fatalf("wait_child across the daemon's end = %q (error %v)", a.text, a.isErr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight was not answered")
	}
	startDaemon(t, sock, tools)
	if text, isErr := call(t, cs, berth.ToolListChildren, map[string]any{}); isErr {
		t.Fatalf("list_children on the next daemon: %q", text)
	}
}

// A call made while no daemon serves the socket waits for one: it is
// answered by a daemon that comes within the wait, and fails as
// unavailable, naming the wait, when none does.
func TestACallWaitsForTheNextDaemon(t *testing.T) {
	sock := socket(t)
	tools := newFakeTools()
	d := startDaemon(t, sock, tools)
	cs := agent(t, Options{Socket: sock, Token: "good", Wait: 2 * time.Second}, withInitialize)
	if _, isErr := call(t, cs, berth.ToolListChildren, map[string]any{}); isErr {
		t.Fatal("list_children failed")
	}
	d.stop()
	began := time.Now()
	if text, isErr := call(t, cs, berth.ToolListChildren, map[string]any{}); !isErr ||
		!strings.HasPrefix(text, "unavailable: no berth daemon answered on the tools socket within 2s") {
		t.Fatalf("list_children with no daemon = %q (error %v)", text, isErr)
	}
	if took := time.Since(began); took < 2*time.Second {
		t.Fatalf("failed after %s, before the wait", took)
	}

	go func() {
		time.Sleep(150 * time.Millisecond)
		startDaemon(t, sock, tools)
	}()
	if text, isErr := call(t, cs, berth.ToolListChildren, map[string]any{}); isErr {
		t.Fatalf("list_children while the next daemon starts = %q", text)
	}
}

// A credential the daemon refuses fails the call at once with the
// daemon's code and message: no dialling again.
func TestARefusedCredentialFailsAtOnce(t *testing.T) {
	sock := socket(t)
	tools := newFakeTools()
	d := startDaemon(t, sock, tools)
	inR, inW := io.Pipe()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Run(Options{Socket: sock, Token: "bad", In: inR, Out: &out, Wait: time.Minute}) }()
	_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}`+"\n")
	_ = inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a refused credential was dialled again")
	}
	want := `{"error":{"code":-32603,"message":"unauthenticated: the berth tools credential is not valid"},"id":1,"jsonrpc":"2.0"}` + "\n"
	if out.String() != want {
		t.Fatalf("the agent got %q, want %q", out.String(), want)
	}
	if d.sent(1) != "" {
		t.Fatal("dialled twice")
	}
}

// A message past the bound is dropped whole (and said so); the next one
// is read as usual.
func TestAMessageTooLongIsDropped(t *testing.T) {
	long := `{"x":"` + strings.Repeat("a", core.ToolsMCPMaxMessage) + `"}`
	br := bufio.NewReaderSize(strings.NewReader(long+"\n\r\n"+`{"id":1}`+"\r\n"), 64<<10)
	if _, err := readLine(br); !errors.Is(err, errTooLong) {
		t.Fatalf("the long message: %v, want errTooLong", err)
	}
	line, err := readLine(br)
	if err != nil || string(line) != `{"id":1}` {
		t.Fatalf("the next message = %q, %v", line, err)
	}
	if _, err := readLine(br); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
}

// A daemon of an older berth (tool calls, no MCP stream) is named as
// such, with what to do, rather than as its 404.
func TestAnOlderDaemonIsNamed(t *testing.T) {
	sock := socket(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	old := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such path: the tools socket answers POST /v1/tools/{tool}"}}`)
	})}
	go func() { _ = old.Serve(ln) }()
	defer old.Close()
	inR, inW := io.Pipe()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Run(Options{Socket: sock, Token: "good", In: inR, Out: &out}) }()
	_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`+"\n")
	_ = inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"id":"a"`) || !strings.Contains(out.String(), "older than this berth mcp") ||
		!strings.Contains(out.String(), "restart the daemon") {
		t.Fatalf("the agent got %q", out.String())
	}
}

// acceptUpgrade reads an upgrade's head from c and answers 101, as a
// daemon that takes the stream does; the reader has what follows.
func acceptUpgrade(c net.Conn) *bufio.Reader {
	br := bufio.NewReader(c)
	for l, err := br.ReadString('\n'); err == nil && l != "\r\n"; l, err = br.ReadString('\n') {
	}
	_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\n\r\n")
	return br
}

// rawAgent runs a relay with o and gives its stdin and stdout as lines.
type rawAgent struct {
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func newRawAgent(t *testing.T, o Options) *rawAgent {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	o.In, o.Out = inR, outW
	a := &rawAgent{in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		a.done <- Run(o)
		_ = outW.Close()
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		<-a.done
	})
	return a
}

// send writes one line to the relay.
func (a *rawAgent) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(a.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// next is the relay's next line to the agent, within 10 s.
func (a *rawAgent) next(t *testing.T) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := a.out.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		return line
	case <-time.After(10 * time.Second):
		t.Fatal("no line from the relay within 10 s")
		return ""
	}
}

func initRequest(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}`
}

// The agent never sees the answer to a replayed initialize: after the
// daemon's restart its next line is the answer to its own next call.
func TestTheReplaysAnswerIsKeptFromTheAgent(t *testing.T) {
	sock := socket(t)
	tools := newFakeTools()
	d := startDaemon(t, sock, tools)
	a := newRawAgent(t, Options{Socket: sock, Token: "good"})
	a.send(t, initRequest(`1`))
	if line := a.next(t); !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize = %q", line)
	}
	a.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	d.stop()
	startDaemon(t, sock, tools)
	a.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if line := a.next(t); !strings.Contains(line, `"id":2`) || !strings.Contains(line, `"tools"`) {
		t.Fatalf("the line after the restart = %q, want tools/list's answer", line)
	}
}

// An agent whose initialize was lost in flight, and which initializes
// again, gets its own initialize through to the next daemon, with no
// replay before it (which that daemon would refuse as a duplicate).
func TestAnAgentThatInitializesAgain(t *testing.T) {
	sock := socket(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// A daemon that takes the upgrade and the initialize, and goes.
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		br := acceptUpgrade(c)
		_, _ = br.ReadString('\n')
		// The listener first: the next daemon's socket takes its path.
		_ = ln.Close()
		_ = c.Close()
	}()
	a := newRawAgent(t, Options{Socket: sock, Token: "good"})
	a.send(t, initRequest(`1`))
	if line := a.next(t); !strings.Contains(line, `"id":1`) || !strings.Contains(line, "went away") {
		t.Fatalf("the lost initialize = %q", line)
	}
	d := startDaemon(t, sock, newFakeTools())
	a.send(t, initRequest(`2`))
	if line := a.next(t); !strings.Contains(line, `"id":2`) || !strings.Contains(line, `"result"`) {
		t.Fatalf("initialize again = %q", line)
	}
	if msgs := messages(t, d.sent(0)); strings.Join(msgs, "; ") != "initialize" {
		t.Fatalf("the next daemon got %q, want the agent's initialize alone", msgs)
	}
}

// A daemon that takes the upgrade and drops the stream at once is not
// dialled in a loop, and the agent's call fails after Wait.
func TestADaemonThatDropsTheStreamIsNotDialledInALoop(t *testing.T) {
	sock := socket(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials sync.WaitGroup
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			dials.Add(1)
			go func() {
				defer dials.Done()
				acceptUpgrade(c)
				_ = c.Close()
			}()
		}
	}()
	a := newRawAgent(t, Options{Socket: sock, Token: "good", Wait: 2 * time.Second})
	began := time.Now()
	a.send(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	line := a.next(t)
	took := time.Since(began)
	if !strings.Contains(line, `"id":7`) || !strings.Contains(line, "unavailable") {
		t.Fatalf("the call = %q", line)
	}
	if took > 5*time.Second {
		t.Fatalf("answered after %s, Wait is 2s", took)
	}
	mu.Lock()
	defer mu.Unlock()
	// At once, then 50, 100, 200, 400, 800 ms, 1 s: about eight in 2 s.
	if n > 15 {
		t.Fatalf("%d dials in %s", n, took)
	}
}

// What is not one JSON-RPC message is answered by the relay (its id
// unknown) and never reaches the daemon, whose stream goes on.
func TestWhatIsNotAMessageIsAnsweredHere(t *testing.T) {
	sock := socket(t)
	d := startDaemon(t, sock, newFakeTools())
	a := newRawAgent(t, Options{Socket: sock, Token: "good"})
	a.send(t, initRequest(`1`))
	a.next(t)
	for line, code := range map[string]string{`not json`: "-32700", `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`: "-32600", `5`: "-32600"} {
		a.send(t, line)
		if got := a.next(t); !strings.Contains(got, `"id":null`) || !strings.Contains(got, `"code":`+code) {
			t.Fatalf("%s answered %q, want code %s", line, got, code)
		}
	}
	a.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if got := a.next(t); !strings.Contains(got, `"id":3`) || !strings.Contains(got, `"result"`) {
		t.Fatalf("ping after them = %q", got)
	}
	if msgs := messages(t, d.sent(0)); strings.Join(msgs, "; ") != "initialize; ping" {
		t.Fatalf("the daemon got %q", msgs)
	}
}

// An initialize the daemon answered with an error is not replayed to the
// next daemon: the agent's MCP session never started.
func TestARefusedInitializeIsNotReplayed(t *testing.T) {
	sock := socket(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan string, 1)
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := acceptUpgrade(c)
			line, _ := br.ReadString('\n')
			if i == 0 {
				_, _ = io.WriteString(c, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unsupported"}}`+"\n")
				_ = c.Close()
				continue
			}
			second <- line
			_ = c.Close()
			_ = ln.Close()
			return
		}
	}()
	log := &testenv.Buffer{}
	a := newRawAgent(t, Options{Socket: sock, Token: "good", Wait: time.Second, Log: log})
	a.send(t, initRequest(`1`))
	if line := a.next(t); !strings.Contains(line, `"unsupported"`) {
		t.Fatalf("initialize = %q", line)
	}
	// Sent before the relay saw the first daemon go, the call would go
	// to it (and fail as in flight), and nothing would be replayed anyway.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "lost the daemon"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the relay did not see the first daemon go")
		}
	}
	a.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	select {
	case line := <-second:
		if !strings.Contains(line, `"tools/list"`) {
			t.Fatalf("the next daemon got %q first, want the agent's tools/list", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not dial the next daemon")
	}
}
