package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Handler that records what it receives.
type recorder struct {
	mu       sync.Mutex
	methods  []string
	params   []json.RawMessage
	block    chan struct{} // when set, HandleRequest waits for it
	slow     time.Duration
	requests chan string
}

func (r *recorder) HandleNotification(method string, params json.RawMessage) {
	if r.slow > 0 {
		time.Sleep(r.slow)
	}
	r.mu.Lock()
	r.methods = append(r.methods, method)
	r.params = append(r.params, bytes.Clone(params))
	r.mu.Unlock()
}

func (r *recorder) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if r.requests != nil {
		r.requests <- method
	}
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if method == "fail" {
		return nil, &Error{Code: 7, Message: "no"}
	}
	return map[string]string{"echo": method}, nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.methods)
}

// pipePair wires a Conn to a fake agent: the test writes agent output to
// agentOut and reads what the client sent from fromClient.
type pipePair struct {
	agentOut   *io.PipeWriter
	fromClient *bufio.Reader
	closeAll   func()
}

type rwc struct {
	io.Reader
	io.WriteCloser
	closeR func() error
}

func (x rwc) Close() error { x.WriteCloser.Close(); return x.closeR() }

func newPair(t *testing.T, h Handler, opts Options) (*Conn, *pipePair) {
	t.Helper()
	inR, inW := io.Pipe()   // agent → client
	outR, outW := io.Pipe() // client → agent
	c := NewConn(rwc{Reader: inR, WriteCloser: outW, closeR: inR.Close}, h, opts)
	c.Start()
	p := &pipePair{agentOut: inW, fromClient: bufio.NewReader(outR)}
	p.closeAll = func() { inW.Close(); outR.Close() }
	t.Cleanup(func() { p.closeAll(); c.Close() })
	return c, p
}

func (p *pipePair) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.agentOut, line+"\n"); err != nil {
		t.Fatalf("agent write: %v", err)
	}
}

func (p *pipePair) readMsg(t *testing.T) message {
	t.Helper()
	line, err := p.fromClient.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read from client: %v", err)
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("client wrote invalid JSON %q: %v", line, err)
	}
	return m
}

func notif(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, i)
}

// Notifications the agent sent before answering are all handled before the
// call returns: a prompt's answer never overtakes its updates.
func TestNotificationsBeforeResponseAreHandledFirst(t *testing.T) {
	h := &recorder{}
	c, p := newPair(t, h, Options{})
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "session/prompt", map[string]string{"x": "y"}, nil) }()
	m := p.readMsg(t)
	if m.Method != "session/prompt" || string(m.ID) != "1" {
		t.Fatalf("unexpected request %+v", m)
	}
	for i := range 1000 {
		p.send(t, notif(i))
	}
	p.send(t, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := h.count(); n != 1000 {
		t.Fatalf("handled %d notifications before the answer, want 1000", n)
	}
	// A notification after the answer is not lost either.
	p.send(t, notif(1000))
	waitFor(t, func() bool { return h.count() == 1001 })
}

// A burst far larger than any queue turns into back-pressure: nothing is
// dropped and the connection stays up.
func TestBurstIsBackPressureNotDeath(t *testing.T) {
	h := &recorder{}
	c, p := newPair(t, h, Options{})
	const n = 50000
	go func() {
		w := bufio.NewWriter(p.agentOut)
		for i := range n {
			fmt.Fprintln(w, notif(i))
		}
		w.Flush()
	}()
	waitFor(t, func() bool { return h.count() == n })
	h.mu.Lock()
	for i, raw := range h.params {
		if !strings.Contains(string(raw), fmt.Sprintf(`"text":"%d"`, i)) {
			h.mu.Unlock()
			t.Fatalf("notification %d out of order: %s", i, raw)
		}
	}
	h.mu.Unlock()
	checkAlive(t, c, p)
}

// checkAlive makes a round trip to prove the connection still works.
func checkAlive(t *testing.T, c *Conn, p *pipePair) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "ping", nil, nil) }()
	m := p.readMsg(t)
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID))
	if err := <-done; err != nil {
		t.Fatalf("connection not alive: %v", err)
	}
}

func TestLinesOverTheCapAreSkippedAndCounted(t *testing.T) {
	h := &recorder{}
	c, p := newPair(t, h, Options{MaxLineBytes: 200 << 10})
	big := strings.Repeat("x", 1<<20)
	p.send(t, `{"jsonrpc":"2.0","method":"big","params":{"t":"`+big+`"}}`)
	p.send(t, notif(1))
	waitFor(t, func() bool { return h.count() == 1 })
	if st := c.Stats(); st.OversizedLines != 1 {
		t.Fatalf("oversized = %d, want 1", st.OversizedLines)
	}
	// A line under the cap but over the read buffer goes through whole.
	mid := strings.Repeat("y", 150<<10)
	p.send(t, `{"jsonrpc":"2.0","method":"mid","params":{"t":"`+mid+`"}}`)
	waitFor(t, func() bool { return h.count() == 2 })
	h.mu.Lock()
	got := len(h.params[1])
	h.mu.Unlock()
	if got < 150<<10 {
		t.Fatalf("long line truncated to %d bytes", got)
	}
	checkAlive(t, c, p)
}

func TestDefaultCapAcceptsTenMegabyteLines(t *testing.T) {
	h := &recorder{}
	_, p := newPair(t, h, Options{})
	big := strings.Repeat("z", 10<<20)
	go io.WriteString(p.agentOut, `{"jsonrpc":"2.0","method":"big","params":{"t":"`+big+`"}}`+"\n")
	waitFor(t, func() bool { return h.count() == 1 })
}

func TestNonJSONLinesAreSkippedAndCounted(t *testing.T) {
	h := &recorder{}
	var mu sync.Mutex
	var seen []string
	c, p := newPair(t, h, Options{OnSkippedLine: func(l []byte) { mu.Lock(); seen = append(seen, string(l)); mu.Unlock() }})
	p.send(t, "Loading model...")
	p.send(t, "{not json")
	p.send(t, `{"jsonrpc":"2.0"}`)
	p.send(t, "")
	p.send(t, notif(1))
	waitFor(t, func() bool { return h.count() == 1 })
	if st := c.Stats(); st.SkippedLines != 3 || st.Messages != 1 {
		t.Fatalf("stats = %+v, want 3 skipped, 1 message", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 || seen[0] != "Loading model..." {
		t.Fatalf("skipped lines seen = %q", seen)
	}
}

// An inbound request that waits (a permission question) does not stop the
// agent's notifications.
func TestBlockedRequestDoesNotBlockNotifications(t *testing.T) {
	h := &recorder{block: make(chan struct{}), requests: make(chan string, 1)}
	_, p := newPair(t, h, Options{})
	p.send(t, `{"jsonrpc":"2.0","id":"a-1","method":"session/request_permission","params":{}}`)
	if m := <-h.requests; m != "session/request_permission" {
		t.Fatal(m)
	}
	for i := range 100 {
		p.send(t, notif(i))
	}
	waitFor(t, func() bool { return h.count() == 100 })
	close(h.block)
	m := p.readMsg(t)
	if string(m.ID) != `"a-1"` || !strings.Contains(string(m.Result), "session/request_permission") {
		t.Fatalf("answer = %+v", m)
	}
}

func TestRequestErrorsAreSentAsJSONRPCErrors(t *testing.T) {
	h := &recorder{}
	_, p := newPair(t, h, Options{})
	p.send(t, `{"jsonrpc":"2.0","id":5,"method":"fail","params":{}}`)
	m := p.readMsg(t)
	if m.Error == nil || m.Error.Code != 7 || string(m.ID) != "5" {
		t.Fatalf("answer = %+v", m)
	}
}

func TestCallReturnsPeerError(t *testing.T) {
	c, p := newPair(t, &recorder{}, Options{})
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "session/prompt", nil, nil) }()
	m := p.readMsg(t)
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"Authentication required"}}`, m.ID))
	err := <-done
	var rpcErr *Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != CodeAuthRequired {
		t.Fatalf("err = %v, want auth required", err)
	}
}

func TestPeerGoneFailsPendingCalls(t *testing.T) {
	c, p := newPair(t, &recorder{}, Options{})
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "session/prompt", nil, nil) }()
	p.readMsg(t)
	p.agentOut.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("pending call succeeded after the peer left")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pending call not failed after the peer left")
	}
	<-c.Done()
	if err := c.Call(context.Background(), "x", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close = %v, want ErrClosed", err)
	}
}

func TestCallHonoursContext(t *testing.T) {
	c, p := newPair(t, &recorder{}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Call(ctx, "hang", nil, nil) }()
	p.readMsg(t)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, "the condition", cond)
}
