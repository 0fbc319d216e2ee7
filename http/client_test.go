package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/client"
)

// These tests drive package client against this package's server and its
// fake service; client's own tests and examples run a real daemon.

// fastReconnect makes a test client's streams reconnect at once.
var fastReconnect = client.WithReconnect(5*time.Millisecond, 5*time.Second, 8)

// tcpClient returns a client of the daemon at addr sending tok (none when
// "": never the token of a home).
func tcpClient(addr, tok string, opts ...client.Option) *client.Client {
	c, err := client.New(addr, append([]client.Option{client.WithToken(tok)}, opts...)...)
	if err != nil {
		panic(err)
	}
	return c
}

// unixClient returns a client of the daemon on the socket sock.
func unixClient(sock, tok string) *client.Client {
	c, err := client.New("unix:"+sock, client.WithToken(tok))
	if err != nil {
		panic(err)
	}
	return c
}

// newTestClient returns a client of s over TCP, closed when the test ends.
func newTestClient(t *testing.T, s *Server) *client.Client {
	t.Helper()
	c := tcpClient("http://"+s.Addr(), testToken, fastReconnect)
	t.Cleanup(c.Close)
	return c
}

// The client speaks for the whole service: a server in front of a client
// of another server answers as that one does.
var _ berth.SessionService = (*client.Client)(nil)

func TestClientRoundTrips(t *testing.T) {
	sock := filepath.Join(socketDir(t), "berth.sock")
	f := newFakeService()
	f.appendEvents("ses_1", 4, berth.EventAgentMessage)
	s := startServer(t, f, ServerOptions{Version: "v1.2"}, sock)
	unix := unixClient(sock, "")
	t.Cleanup(unix.Close)
	for name, c := range map[string]*client.Client{"tcp": newTestClient(t, s), "unix": unix} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			checkSessionRoundTrips(t, ctx, c, f)
			checkTurnRoundTrips(t, ctx, c, f)
			checkLogRoundTrips(t, ctx, c)
			sess, err := c.StopSession(ctx, "ses_new")
			if err != nil || sess.State != berth.StateStopped {
				t.Errorf("StopSession = %+v, %v", sess, err)
			}
			if err := c.DeleteSession(ctx, "ses_new"); err != nil {
				t.Errorf("DeleteSession = %v", err)
			}
		})
	}
}

// checkSessionRoundTrips checks the client's calls about the daemon and
// its sessions against the fake of TestClientRoundTrips.
func checkSessionRoundTrips(t *testing.T, ctx context.Context, c *client.Client, f *fakeService) {
	t.Helper()
	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.Version != "v1.2" || h.Store != "sqlite" {
		t.Errorf("Health = %+v, %v", h, err)
	}
	agents, err := c.Agents(ctx)
	if err != nil || len(agents) != 1 || agents[0].Name != "demo" || !agents[0].Available {
		t.Errorf("Agents = %+v, %v", agents, err)
	}
	sess, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Name: "n", Labels: map[string]string{"k": "v"}})
	if err != nil || sess.ID != "ses_new" || sess.Labels["k"] != "v" {
		t.Errorf("CreateSession = %+v, %v", sess, err)
	}
	sess, err = c.GetSession(ctx, "ses_1")
	if err != nil || sess.ID != "ses_1" || sess.State != berth.StateActive {
		t.Errorf("GetSession = %+v, %v", sess, err)
	}
	page, err := c.ListSessions(ctx, berth.SessionFilter{State: berth.StateActive, Labels: map[string]string{"team": "web"}, Limit: 3})
	if err != nil || len(page.Sessions) != 2 {
		t.Errorf("ListSessions = %+v, %v", page, err)
	}
	if lf := f.lastSessionF; lf.State != berth.StateActive || lf.Labels["team"] != "web" || lf.Limit != 3 {
		t.Errorf("ListSessions filter reached the service as %+v", lf)
	}
}

// checkTurnRoundTrips checks the client's prompts and turns.
func checkTurnRoundTrips(t *testing.T, ctx context.Context, c *client.Client, f *fakeService) {
	t.Helper()
	res, err := c.Prompt(ctx, "ses_1", berth.PromptRequest{Text: "<b>&", Mode: berth.ModeSteer})
	if err != nil || res.Status != "started" || res.TurnID != "turn_1" || f.lastPrompt.Text != "<b>&" {
		t.Errorf("Prompt = %+v, %v (sent %+v)", res, err, f.lastPrompt)
	}
	turn, err := c.PromptWait(ctx, "ses_1", berth.PromptRequest{Text: "hi"})
	if err != nil || turn.StopReason != berth.TurnEndTurn || turn.Text != "hello" {
		t.Errorf("PromptWait = %+v, %v", turn, err)
	}
	waited, err := c.WaitTurn(ctx, "ses_1", "entry_7")
	if err != nil || waited.StopReason != berth.TurnEndTurn || waited.Text != "hello" || f.lastWaitTurn != "entry_7" {
		t.Errorf("WaitTurn = %+v, %v (asked for %q)", waited, err, f.lastWaitTurn)
	}
	turnID, err := c.Cancel(ctx, "ses_1")
	if err != nil || turnID != "turn_1" {
		t.Errorf("Cancel = %q, %v", turnID, err)
	}
}

// checkLogRoundTrips checks the client's reads of a session's log, and a
// raw call.
func checkLogRoundTrips(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	evs, err := c.ListEvents(ctx, "ses_1", berth.EventFilter{After: 1, Limit: 2, Type: berth.EventAgentMessage})
	if err != nil || len(evs) != 2 || evs[0].Seq != 2 || evs[1].Seq != 3 {
		t.Errorf("ListEvents = %v, %v", evs, err)
	}
	evs, err = c.ListEvents(ctx, "ses_1", berth.EventFilter{After: 4})
	if err != nil || len(evs) != 0 {
		t.Errorf("ListEvents past the end = %v, %v", evs, err)
	}
	turns, err := c.Transcript(ctx, "ses_1")
	if err != nil || len(turns) != 1 || turns[0].TurnID != "turn_1" || turns[0].ToolCalls == nil {
		t.Errorf("Transcript = %+v, %v", turns, err)
	}
	var raw json.RawMessage
	if err := c.Do(ctx, "GET", "/v1/sessions/ses_1", nil, nil, &raw); err != nil || !strings.HasPrefix(string(raw), `{"id":"ses_1"`) {
		t.Errorf("Do raw = %s, %v", raw, err)
	}
}

func TestClientErrors(t *testing.T) {
	f := newFakeService()
	s := startServer(t, f, ServerOptions{}, "")
	c := newTestClient(t, s)
	ctx := context.Background()

	_, err := c.GetSession(ctx, "nope")
	var e *berth.Error
	if !errors.As(err, &e) || e.Code != berth.ENotFound || e.Message != "session nope not found" || e.Details != nil {
		t.Errorf("GetSession(missing) = %#v", err)
	}
	f.mu.Lock()
	f.err = &berth.Error{Code: berth.EQueueFull, Message: "queue is full", Details: map[string]any{"max_queue": 10}}
	f.mu.Unlock()
	_, err = c.Prompt(ctx, "ses_1", berth.PromptRequest{Text: "x"})
	if !errors.As(err, &e) || e.Code != berth.EQueueFull || e.Details["max_queue"] != 10.0 {
		t.Errorf("Prompt(full) = %#v", err)
	}
	// Refused at the edge: a bad request never reaches the service.
	_, err = c.Prompt(ctx, "ses_1", berth.PromptRequest{Text: " "})
	if berth.ErrorCode(err) != berth.EInvalid {
		t.Errorf("Prompt(empty) = %v", err)
	}

	// An answer without an error body is mapped from its status.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer plain.Close()
	pc := tcpClient(plain.URL, "")
	defer pc.Close()
	if _, err := pc.Health(ctx); berth.ErrorCode(err) != berth.EUnavailable || !strings.Contains(berth.ErrorMessage(err), "502") {
		t.Errorf("plain 502 = %v", err)
	}
}

func TestClientNoDaemon(t *testing.T) {
	ctx := context.Background()
	// A port that was just free: nothing listens there.
	s := NewServer(newFakeService(), ServerOptions{Token: testToken})
	if err := s.Listen("127.0.0.1:0", ""); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	s.Close(ctx)
	sock := filepath.Join(socketDir(t), "none.sock")
	for _, c := range []*client.Client{tcpClient(addr, testToken), unixClient(sock, "")} {
		_, err := c.Health(ctx)
		if berth.ErrorCode(err) != berth.EUnavailable || !strings.Contains(berth.ErrorMessage(err), "no berth daemon answers at "+c.Target()) {
			t.Errorf("%s: %v", c.Target(), err)
		}
		c.Close()
	}
	// The caller's own cancellation stays a context error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	c := tcpClient(addr, testToken)
	defer c.Close()
	if _, err := c.Health(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled Health = %v", err)
	}
}

// collect reads a client stream to its end.
func collect(t *testing.T, c *client.Client, ctx context.Context, id string, after int64) ([]int64, error) {
	t.Helper()
	var seqs []int64
	for ev, err := range c.Events(ctx, id, after) {
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, ev.Seq)
	}
	return seqs, nil
}

// wantSeqs checks that seqs run from..to.
func wantSeqs(t *testing.T, seqs []int64, from, to int64) {
	t.Helper()
	if int64(len(seqs)) != to-from+1 {
		t.Fatalf("seqs = %v, want %d..%d", seqs, from, to)
	}
	for i, s := range seqs {
		if s != from+int64(i) {
			t.Fatalf("seqs = %v, want %d..%d", seqs, from, to)
		}
	}
}

func TestClientStream(t *testing.T) {
	f := newFakeService()
	f.appendEvents("ses_1", 5, berth.EventAgentMessage)
	f.stop("ses_1")
	s := startServer(t, f, ServerOptions{}, "")
	c := newTestClient(t, s)
	ctx := context.Background()

	seqs, err := collect(t, c, ctx, "ses_1", 2)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, seqs, 3, 5)

	// The raw form is the daemon's JSON.
	var n int
	for raw, err := range c.EventsRaw(ctx, "ses_1", 4) {
		if err != nil || !strings.HasPrefix(string(raw), `{"seq":5,"session_id":"ses_1"`) {
			t.Errorf("raw = %s, %v", raw, err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("raw stream gave %d events", n)
	}

	// Breaking out of the loop ends the stream.
	for ev, err := range c.Events(ctx, "ses_1", 0) {
		if err != nil || ev.Seq != 1 {
			t.Fatalf("first = %v, %v", ev, err)
		}
		break
	}

	// A refusal is final: no reconnection.
	calls := f.streamCalls
	if _, err := collect(t, c, ctx, "nope", 0); berth.ErrorCode(err) != berth.ENotFound {
		t.Errorf("stream of a missing session = %v", err)
	}
	if f.streamCalls != calls {
		t.Errorf("a refused stream was retried")
	}

	// An error event ends the stream with its error.
	f.mu.Lock()
	f.streamErr = berth.Errorf(berth.EConflict, "stream broke")
	delete(f.stopped, "ses_1")
	f.mu.Unlock()
	seqs, err = collect(t, c, ctx, "ses_1", 3)
	if berth.ErrorCode(err) != berth.EConflict || berth.ErrorMessage(err) != "stream broke" {
		t.Errorf("error event = %v", err)
	}
	wantSeqs(t, seqs, 4, 5)
}

func TestClientStreamContextEnds(t *testing.T) {
	f := newFakeService()
	f.appendEvents("ses_1", 2, berth.EventAgentMessage)
	s := startServer(t, f, ServerOptions{PingInterval: 10 * time.Millisecond}, "")
	c := newTestClient(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seqs []int64
	var last error
	for ev, err := range c.Events(ctx, "ses_1", 0) {
		if err != nil {
			last = err
			break
		}
		seqs = append(seqs, ev.Seq)
		if ev.Seq == 2 {
			cancel()
		}
	}
	wantSeqs(t, seqs, 1, 2)
	if !errors.Is(last, context.Canceled) {
		t.Errorf("stream after cancel ended with %v", last)
	}
}

func TestClientStreamReconnectsAfterDaemonRestart(t *testing.T) {
	// The first daemon holds events 1..3 of a live session.
	first := newFakeService()
	first.appendEvents("ses_1", 3, berth.EventAgentMessage)
	s1, done1 := serveTCP(t, first, ServerOptions{Token: testToken})
	addr := s1.Addr()

	c := tcpClient(addr, testToken, fastReconnect)
	defer c.Close()

	// The second daemon, on the same address, has the whole log: 1..6.
	second := newFakeService()
	second.appendEvents("ses_1", 6, berth.EventAgentMessage)
	second.stop("ses_1")

	var seqs []int64
	for ev, err := range c.Events(context.Background(), "ses_1", 0) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		seqs = append(seqs, ev.Seq)
		if ev.Seq == 3 {
			// Restart the daemon under the reader's feet.
			if err := s1.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := <-done1; err != nil {
				t.Fatal(err)
			}
			s2 := NewServer(second, ServerOptions{Token: testToken})
			if err := s2.Listen(addr, ""); err != nil {
				t.Fatalf("relisten on %s: %v", addr, err)
			}
			serveServer(t, s2)
		}
	}
	wantSeqs(t, seqs, 1, 6)
	if second.lastStreamFrom != 3 {
		t.Errorf("reconnected after %d, want Last-Event-ID 3", second.lastStreamFrom)
	}
}

func TestClientStreamGivesUp(t *testing.T) {
	s := NewServer(newFakeService(), ServerOptions{Token: testToken})
	if err := s.Listen("127.0.0.1:0", ""); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	s.Close(context.Background())
	c := tcpClient(addr, testToken, client.WithReconnect(time.Millisecond, time.Second, 3))
	defer c.Close()
	if _, err := collect(t, c, context.Background(), "ses_1", 0); berth.ErrorCode(err) != berth.EUnavailable {
		t.Errorf("stream with no daemon = %v", err)
	}
}

// A stream that a proxy closes cleanly, without the daemon's end comment,
// is not taken for the whole log: the client resumes after the last event.
func TestClientStreamResumesAfterACleanCloseWithoutEnd(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		from, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
		if calls.Add(1) == 1 {
			// Two events, then a clean close with no end comment.
			for seq := from + 1; seq <= from+2; seq++ {
				fmt.Fprintf(w, "id: %d\nevent: agent_message\ndata: {\"seq\":%d,\"type\":\"agent_message\"}\n\n", seq, seq)
			}
			return
		}
		fmt.Fprintf(w, "id: %d\nevent: session_stopped\ndata: {\"seq\":%d,\"type\":\"session_stopped\"}\n\n: end\n\n", from+1, from+1)
	}))
	defer srv.Close()
	c := tcpClient(srv.URL, "", client.WithReconnect(time.Millisecond, time.Second, 8))
	var seqs []int64
	for ev, err := range c.Events(context.Background(), "ses_x", 0) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ev.Seq)
	}
	if fmt.Sprint(seqs) != "[1 2 3]" || calls.Load() != 2 {
		t.Fatalf("seqs %v over %d connections, want [1 2 3] over 2", seqs, calls.Load())
	}
}

// A server whose service is a client of another server answers as that
// one does, streams and errors included: the client is the whole
// berth.SessionService, so what is written against the interface (this
// server, the CLI) runs on either.
func TestServerOverClientAnswersAsTheDaemon(t *testing.T) {
	f := newFakeService()
	f.appendEvents("ses_1", 5, berth.EventAgentMessage)
	f.stop("ses_1")
	back := startServer(t, f, ServerOptions{Version: "v9"}, "")
	proxy := newTestClient(t, back)
	front := startServer(t, proxy, ServerOptions{}, "")
	c := newTestClient(t, front)
	ctx := context.Background()

	if h, err := c.Health(ctx); err != nil || h.Version != "v9" || h.NodeID != "node_1" {
		t.Errorf("Health through the proxy = %+v, %v", h, err)
	}
	if agents, err := c.Agents(ctx); err != nil || len(agents) != 1 || agents[0].Name != "demo" {
		t.Errorf("Agents through the proxy = %+v, %v", agents, err)
	}
	if _, err := c.GetSession(ctx, "nope"); berth.ErrorCode(err) != berth.ENotFound {
		t.Errorf("a missing session through the proxy = %v", err)
	}
	evs, err := c.ListEvents(ctx, "ses_1", berth.EventFilter{After: 2})
	if err != nil || len(evs) != 3 || evs[0].Seq != 3 {
		t.Errorf("ListEvents through the proxy = %v, %v", evs, err)
	}
	// The stream of a stopped session ends after its last event on both
	// hops (io.EOF from the client's stream ends the front's response).
	seqs, err := collect(t, c, ctx, "ses_1", 1)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, seqs, 2, 5)
	if _, err := collect(t, c, ctx, "nope", 0); berth.ErrorCode(err) != berth.ENotFound {
		t.Errorf("stream of a missing session through the proxy = %v", err)
	}
}
