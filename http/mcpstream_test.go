package http

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// blockingTools are fakeTools whose wait_child waits for its context.
type blockingTools struct {
	fakeTools
	mu      sync.Mutex
	waiting int
}

func (b *blockingTools) WaitChild(ctx context.Context, _ berth.WaitChildArgs) (*berth.WaitChildResult, error) {
	b.mu.Lock()
	b.waiting++
	b.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// mcpSocket serves tools (credential "good") on a Unix socket, its
// MCP streams' writes bounded by writeTimeout (the default when 0).
func mcpSocket(t *testing.T, tools berth.ChildTools, writeTimeout time.Duration) string {
	t.Helper()
	sock := filepath.Join(testenv.ShortTempDir(t, "mcp"), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	open := func(token string) (berth.ChildTools, func(), error) {
		if token != "good" {
			return nil, nil, berth.Errorf(berth.EUnauthenticated, "bad credential")
		}
		return tools, func() {}, nil
	}
	h := NewToolsHandler(open, 0, "test", nil).(*toolsHandler)
	if writeTimeout > 0 {
		h.writeTimeout = writeTimeout
	}
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})
	return sock
}

// upgradeMCP opens an MCP stream on sock and returns it with the status
// line of the answer (the stream is usable only after a 101).
func upgradeMCP(t *testing.T, sock string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fmt.Fprintf(c, "GET /v1/mcp HTTP/1.1\r\nHost: berth\r\nAuthorization: Bearer good\r\nConnection: Upgrade\r\nUpgrade: berth-mcp\r\n\r\n")
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	for {
		h, err := br.ReadString('\n')
		if err != nil || h == "\r\n" {
			break
		}
	}
	return c, br, status
}

// initialize initializes the MCP session of a stream.
func initialize(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	fmt.Fprintf(c, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}`+"\n")
	if answer, err := br.ReadString('\n'); err != nil || !strings.Contains(answer, `"result"`) {
		t.Fatalf("initialize = %q, %v", answer, err)
	}
	fmt.Fprintf(c, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
}

// An agent that sends requests and reads no answer has the daemon hold
// at most mcpInFlight of them, not a goroutine a message (however the
// messages are laid out: a line each, or many on one line between
// carriage returns); the rest are refused at once; and once its answers
// wait past the write timeout the stream ends.
func TestAnMCPStreamHoldsFewRequests(t *testing.T) {
	// The refusals' answers (about 130 bytes each) must outgrow what the
	// socket's buffers hold, for the daemon's writes to block.
	const total = 10000
	pad := strings.Repeat(" ", 1<<10)
	for name, sep := range map[string]string{"a line each": "\n", "one line": "\r"} {
		t.Run(name, func(t *testing.T) {
			sock := mcpSocket(t, &fakeTools{}, 300*time.Millisecond)
			c, br, _ := upgradeMCP(t, sock)
			initialize(t, c, br)
			before := runtime.NumGoroutine()
			sent := make(chan int, 1)
			go func() {
				n := 0
				// Only the daemon may end this: the agent waits long.
				_ = c.SetWriteDeadline(time.Now().Add(time.Minute))
				for ; n < total; n++ {
					if _, err := fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%d,"method":"ping"%s}`+sep, n, pad); err != nil {
						break
					}
				}
				sent <- n
			}()
			peak := 0
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				peak = max(peak, runtime.NumGoroutine()-before)
			}
			if peak > 6*mcpInFlight {
				t.Fatalf("%d goroutines more while the agent read nothing", peak)
			}
			select {
			case n := <-sent:
				if n == total {
					t.Fatal("the stream of an agent that reads nothing took all it sent")
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the stream of an agent that reads nothing did not end")
			}
		})
	}
}

// Requests past mcpInFlight on a stream are refused at once, the stream
// going on; an id already in flight is refused too.
func TestAnMCPStreamRefusesWhatIsPastItsBound(t *testing.T) {
	tools := &blockingTools{}
	sock := mcpSocket(t, tools, 0)
	c, br, _ := upgradeMCP(t, sock)
	initialize(t, c, br)
	for i := range mcpInFlight {
		fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait_child","arguments":{"child_id":"ses_x","timeout_seconds":60}}}`+"\n", i)
	}
	waitFor(t, func() bool {
		tools.mu.Lock()
		defer tools.mu.Unlock()
		return tools.waiting == mcpInFlight
	})
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, `{"jsonrpc":"2.0","id":0,"method":"ping"}`+"\n")
	if answer, err := br.ReadString('\n'); err != nil || !strings.Contains(answer, `"id":0`) || !strings.Contains(answer, "in flight already") {
		t.Fatalf("an id in flight again = %q, %v", answer, err)
	}
	fmt.Fprintf(c, `{"jsonrpc":"2.0","id":"more","method":"ping"}`+"\n")
	if answer, err := br.ReadString('\n'); err != nil || !strings.Contains(answer, `"id":"more"`) || !strings.Contains(answer, "rate_limited: more than") {
		t.Fatalf("one request more = %q, %v", answer, err)
	}
}

// An agent that leaves while its calls wait ends its stream at once: the
// session's calls and streams are free again for its next `berth mcp`.
func TestAnAgentLeavingEndsItsStream(t *testing.T) {
	tools := &blockingTools{}
	sock := mcpSocket(t, tools, 0)
	var conns []net.Conn
	for s := range 2 {
		c, br, _ := upgradeMCP(t, sock)
		initialize(t, c, br)
		for i := range mcpInFlight {
			fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait_child","arguments":{"child_id":"ses_x","timeout_seconds":60}}}`+"\n", s*100+i)
		}
		// One more than the stream holds, left unread.
		fmt.Fprintf(c, `{"jsonrpc":"2.0","id":"x","method":"ping"}`+"\n")
		conns = append(conns, c)
	}
	waitFor(t, func() bool {
		tools.mu.Lock()
		defer tools.mu.Unlock()
		return tools.waiting == maxMCPCalls
	})
	for _, c := range conns {
		_ = c.Close()
	}
	c, br, status := upgradeMCP(t, sock)
	if !strings.HasPrefix(status, "HTTP/1.1 101 ") {
		t.Fatalf("a stream after the agent left: %q", status)
	}
	initialize(t, c, br)
	waitFor(t, func() bool {
		fmt.Fprintf(c, `{"jsonrpc":"2.0","id":"l","method":"tools/call","params":{"name":"list_children","arguments":{}}}`+"\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		answer, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return !strings.Contains(answer, "rate_limited")
	})
}

// waitFor waits up to 5 s for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not within 5 s")
		}
	}
}

// A session has at most maxMCPStreams streams: one more is refused
// (rate_limited) until one of them ends.
func TestASessionHasFewMCPStreams(t *testing.T) {
	sock := mcpSocket(t, &fakeTools{}, 0)
	var conns []net.Conn
	for range maxMCPStreams {
		c, _, status := upgradeMCP(t, sock)
		if !strings.HasPrefix(status, "HTTP/1.1 101 ") {
			t.Fatalf("stream %d: %q", len(conns)+1, status)
		}
		conns = append(conns, c)
	}
	c, br, status := upgradeMCP(t, sock)
	// The refusal's body, then the connection stays for the next request.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	body, _ := io.ReadAll(br)
	if !strings.HasPrefix(status, "HTTP/1.1 429 ") || !strings.Contains(string(body), `"code":"rate_limited"`) {
		t.Fatalf("one stream more = %q %s", status, body)
	}
	_ = c.Close()
	_ = conns[0].Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, _, status := upgradeMCP(t, sock)
		if strings.HasPrefix(status, "HTTP/1.1 101 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stream after one ended: %q", status)
		}
	}
}

// The session's tool calls in flight over MCP are bounded together, over
// all its streams: one more is a rate_limited tool error.
func TestASessionsToolCallsAreBounded(t *testing.T) {
	tools := &blockingTools{}
	sock := mcpSocket(t, tools, 0)
	var streams [2]*bufio.Reader
	var conns [2]net.Conn
	for i := range streams {
		conns[i], streams[i], _ = upgradeMCP(t, sock)
		initialize(t, conns[i], streams[i])
	}
	call := func(c net.Conn, id int) {
		fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait_child","arguments":{"child_id":"ses_x","timeout_seconds":60}}}`+"\n", id)
	}
	for i := range maxMCPCalls {
		call(conns[i%2], i)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		tools.mu.Lock()
		n := tools.waiting
		tools.mu.Unlock()
		if n == maxMCPCalls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls waiting, want %d", n, maxMCPCalls)
		}
	}
	call(conns[0], 99)
	_ = conns[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, err := streams[0].ReadString('\n')
	if err != nil || !strings.Contains(answer, `"id":99`) || !strings.Contains(answer, "rate_limited: ") {
		t.Fatalf("one call more = %q, %v", answer, err)
	}
}

// An agent that has read an answer may send the next request at once,
// while the daemon's write of that answer has not returned yet: the
// answered request no longer counts against the stream's bound. The
// bound still holds, one answer on its way out apart.
func TestAnAnswerReadFreesItsRoom(t *testing.T) {
	wire := &heldWire{in: make(chan jsonrpc.Message, 4), held: mustID(t, 1), writing: make(chan struct{}),
		release: make(chan struct{}), refused: make(chan jsonrpc.ID, 4), closed: make(chan struct{})}
	c := &boundedConn{Connection: wire, open: map[jsonrpc.ID]bool{}}
	ctx := context.Background()
	request := func(id int64) *jsonrpc.Request {
		return &jsonrpc.Request{ID: mustID(t, id), Method: "tools/call"}
	}
	for id := range int64(mcpInFlight) {
		wire.in <- request(id + 1)
		if msg, err := c.Read(ctx); err != nil || msg.(*jsonrpc.Request).ID != mustID(t, id+1) {
			t.Fatalf("request %d: %+v %v", id+1, msg, err)
		}
	}
	written := make(chan error, 1)
	go func() { written <- c.Write(ctx, &jsonrpc.Response{ID: mustID(t, 1)}) }()
	<-wire.writing
	// Request 1's answer is out (the agent read it); its write has not returned.
	wire.in <- request(mcpInFlight + 1)
	read := make(chan jsonrpc.Message, 1)
	go func() {
		msg, _ := c.Read(ctx)
		read <- msg
	}()
	select {
	case msg := <-read:
		if r, ok := msg.(*jsonrpc.Request); !ok || r.ID != mustID(t, mcpInFlight+1) {
			t.Fatalf("read %+v", msg)
		}
	case id := <-wire.refused:
		t.Fatalf("request %v refused while request 1's answer was being written", id.Raw())
	}
	// One more is past the bound.
	wire.in <- request(mcpInFlight + 2)
	go func() { _, _ = c.Read(ctx) }()
	if id := <-wire.refused; id != mustID(t, mcpInFlight+2) {
		t.Fatalf("refused %v", id.Raw())
	}
	close(wire.release)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	_ = wire.Close()
}

// heldWire is an MCP connection whose write of the answer to held
// signals writing and waits for release (the agent has the bytes; the
// write has not returned); the refusals it is given are sent on refused.
type heldWire struct {
	in       chan jsonrpc.Message
	held     jsonrpc.ID
	writing  chan struct{}
	release  chan struct{}
	refused  chan jsonrpc.ID
	closed   chan struct{}
	closeOne sync.Once
}

func (w *heldWire) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-w.in:
		return msg, nil
	case <-w.closed:
		return nil, io.EOF
	}
}

func (w *heldWire) Write(_ context.Context, msg jsonrpc.Message) error {
	resp, ok := msg.(*jsonrpc.Response)
	switch {
	case ok && resp.ID == w.held:
		close(w.writing)
		<-w.release
	case ok && resp.Error != nil:
		w.refused <- resp.ID
	}
	return nil
}

func (w *heldWire) Close() error {
	w.closeOne.Do(func() { close(w.closed) })
	return nil
}

func (w *heldWire) SessionID() string { return "" }

// mustID is the JSON-RPC id v.
func mustID(t *testing.T, v int64) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(float64(v))
	if err != nil {
		t.Fatal(err)
	}
	return id
}
