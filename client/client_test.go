package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/session"
)

// The client and the session manager are one interface.
var (
	_ berth.SessionService = (*client.Client)(nil)
	_ berth.SessionService = (*session.Manager)(nil)
)

// startDaemon opens a daemon on a new home for the test, closed when it ends.
func startDaemon(t *testing.T, tcp bool) *daemon.Daemon {
	t.Helper()
	home := testenv.ShortTempDir(t, "berth-client-")
	ctx := context.Background()
	d, err := openDaemon(ctx, home, tcp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(ctx) })
	return d
}

// daemonClient returns a client of d, closed when the test ends.
func daemonClient(t *testing.T, d *daemon.Daemon, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := d.Client(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// The same use of berth.SessionService, every method, answers the same
// through the client as from the manager in the daemon's process.
func TestClientAndManagerAnswerAlike(t *testing.T) {
	d := startDaemon(t, false)
	for name, svc := range map[string]berth.SessionService{"manager": d.Manager(), "client": daemonClient(t, d)} {
		t.Run(name, func(t *testing.T) { useEveryMethod(t, svc, name) })
	}
}

// useEveryMethod drives svc through every method of berth.SessionService
// with the demo agent and checks each answer.
func useEveryMethod(t *testing.T, svc berth.SessionService, label string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := svc.Health(ctx)
	if err != nil || h.Status != "ok" || h.Store != "sqlite" {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	agents, err := svc.Agents(ctx)
	if err != nil || !hasAgent(agents, "demo") {
		t.Fatalf("Agents = %+v, %v", agents, err)
	}
	if _, err := svc.InstallAgent(ctx, "demo"); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("InstallAgent of an agent npx does not run = %v", err)
	}
	// The all-sessions stream, from now on.
	changes, err := svc.StreamChanges(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer changes.Close()

	s, err := svc.CreateSession(ctx, berth.CreateRequest{Agent: "demo", PermissionMode: berth.PermAsk, Labels: map[string]string{"t": label}})
	if err != nil || s.State != berth.StateActive {
		t.Fatalf("CreateSession = %+v, %v", s, err)
	}
	chs, err := changes.Next(ctx)
	if err != nil || len(chs) == 0 || !strings.Contains(string(chs[0].Data), s.ID) {
		t.Fatalf("first change = %+v, %v", chs, err)
	}
	if got, err := svc.GetSession(ctx, s.ID); err != nil || got.ID != s.ID {
		t.Fatalf("GetSession = %+v, %v", got, err)
	}
	page, err := svc.ListSessions(ctx, berth.SessionFilter{Labels: map[string]string{"t": label}})
	if err != nil || len(page.Sessions) != 1 || page.Sessions[0].ID != s.ID {
		t.Fatalf("ListSessions = %+v, %v", page, err)
	}

	// A turn whose permission question is answered here.
	res, err := svc.Prompt(ctx, s.ID, berth.PromptRequest{Text: "echo one\nask may I"})
	if err != nil || res.TurnID == "" {
		t.Fatalf("Prompt = %+v, %v", res, err)
	}
	perm := waitPending(t, ctx, svc, s.ID)
	if p, err := svc.DecidePermission(ctx, s.ID, perm.ID, berth.PermissionDecision{Decision: berth.DecisionAllowOnce}); err != nil || p.State != berth.PermissionDecided {
		t.Fatalf("DecidePermission = %+v, %v", p, err)
	}
	turn, err := svc.WaitTurn(ctx, s.ID, res.TurnID)
	if err != nil || turn.StopReason != berth.TurnEndTurn || turn.Text != "one\npermission: allow" {
		t.Fatalf("WaitTurn = %+v, %v", turn, err)
	}
	if _, err := svc.Cancel(ctx, s.ID); berth.ErrorCode(err) != berth.EConflict {
		t.Fatalf("Cancel when idle = %v, want conflict", err)
	}

	// The log, streamed and paged: the same events.
	st, err := svc.StreamEvents(ctx, s.ID, s.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	var streamed []berth.Event
	for len(streamed) == 0 || streamed[len(streamed)-1].Type != berth.EventTurnEnded {
		batch, err := st.Next(ctx)
		if err != nil {
			t.Fatalf("stream Next: %v", err)
		}
		streamed = append(streamed, batch...)
	}
	st.Close()
	// The store has the turn's end once the log has written it.
	var evs []berth.Event
	for len(evs) < len(streamed) {
		if evs, err = svc.ListEvents(ctx, s.ID, berth.EventFilter{After: s.LastSeq}); err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("ListEvents has %d events, the stream %d", len(evs), len(streamed))
		}
		if len(evs) < len(streamed) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i, ev := range streamed {
		if evs[i].Seq != ev.Seq || evs[i].Type != ev.Type || ev.Seq != s.LastSeq+int64(i)+1 {
			t.Fatalf("listed %d = %d %s, streamed %d %s", i, evs[i].Seq, evs[i].Type, ev.Seq, ev.Type)
		}
	}
	if turns, err := svc.Transcript(ctx, s.ID); err != nil || len(turns) != 1 || turns[0].TurnID != res.TurnID {
		t.Fatalf("Transcript = %+v, %v", turns, err)
	}
	if q, err := svc.ListQueue(ctx, s.ID); err != nil || len(q.Entries) != 0 {
		t.Fatalf("ListQueue = %+v, %v", q, err)
	}
	if err := svc.CancelQueueEntry(ctx, s.ID, "entry_none"); berth.ErrorCode(err) != berth.ENotFound {
		t.Fatalf("CancelQueueEntry(none) = %v", err)
	}
	if ps, err := svc.ListPermissions(ctx, s.ID, ""); err != nil || len(ps) != 1 || ps[0].ID != perm.ID {
		t.Fatalf("ListPermissions = %+v, %v", ps, err)
	}

	// The sandbox and the workspace.
	out, err := svc.Exec(ctx, s.ID, berth.ExecRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if err != nil || out.ExitCode != 3 || out.Stdout != "out\n" || out.Stderr != "err\n" {
		t.Fatalf("Exec = %+v, %v", out, err)
	}
	snap, err := svc.CreateSnapshot(ctx, s.ID)
	if err != nil || snap.ID == "" {
		t.Fatalf("CreateSnapshot = %+v, %v", snap, err)
	}
	if snaps, err := svc.ListSnapshots(ctx, s.ID); err != nil || len(snaps) != 1 || snaps[0].ID != snap.ID {
		t.Fatalf("ListSnapshots = %+v, %v", snaps, err)
	}

	// A child, then the parent's life to its end.
	child, err := svc.SpawnChild(ctx, s.ID, berth.CreateRequest{TTLSeconds: 60}, "key-1")
	if err != nil || child.ParentID != s.ID {
		t.Fatalf("SpawnChild = %+v, %v", child, err)
	}
	if again, err := svc.SpawnChild(ctx, s.ID, berth.CreateRequest{TTLSeconds: 60}, "key-1"); err != nil || again.ID != child.ID {
		t.Fatalf("SpawnChild retried = %+v, %v", again, err)
	}
	if s, err = svc.StopSession(ctx, s.ID); err != nil || s.State != berth.StateStopped {
		t.Fatalf("StopSession = %+v, %v", s, err)
	}
	if rep, err := svc.Repair(ctx, s.ID, true, false); err != nil || rep.Persisted {
		t.Fatalf("Repair(dry run) = %+v, %v", rep, err)
	}
	if s, err = svc.ResumeSession(ctx, s.ID); err != nil || s.State != berth.StateActive {
		t.Fatalf("ResumeSession = %+v, %v", s, err)
	}
	if err := svc.DeleteSession(ctx, s.ID); err != nil {
		t.Fatalf("DeleteSession = %v", err)
	}
	_, err = svc.GetSession(ctx, s.ID)
	var e *berth.Error
	if !errors.As(err, &e) || e.Code != berth.ENotFound {
		t.Fatalf("GetSession(deleted) = %#v", err)
	}
	if _, err := svc.StreamEvents(ctx, s.ID, 0); berth.ErrorCode(err) != berth.ENotFound {
		t.Fatalf("StreamEvents(deleted) = %v", err)
	}
}

// hasAgent reports whether the catalog lists name.
func hasAgent(agents []berth.AgentInfo, name string) bool {
	for _, a := range agents {
		if a.Name == name {
			return true
		}
	}
	return false
}

// waitPending polls until the session has a pending permission.
func waitPending(t *testing.T, ctx context.Context, svc berth.SessionService, id string) *berth.Permission {
	t.Helper()
	for {
		ps, err := svc.ListPermissions(ctx, id, berth.PermissionPending)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) > 0 {
			return ps[0]
		}
		select {
		case <-ctx.Done():
			t.Fatal("no permission became pending")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// The context of one Next ends that call only: the next call goes on from
// the same position (over a new connection), missing and repeating nothing.
func TestStreamNextContextEndsOnlyThatCall(t *testing.T) {
	d := startDaemon(t, false)
	c := daemonClient(t, d)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.StreamEvents(ctx, s.ID, s.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if evs, err := st.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an idle session = %v, %v; want the deadline", evs, err)
	}
	if _, err := c.Prompt(ctx, s.ID, berth.PromptRequest{Text: "echo a\necho b"}); err != nil {
		t.Fatal(err)
	}
	want := s.LastSeq + 1
	// A context that ends between two calls does not cost the next one
	// anything either.
	first, endFirst := context.WithCancel(ctx)
	for {
		callCtx := ctx
		if want == s.LastSeq+1 {
			callCtx = first
		}
		evs, err := st.Next(callCtx)
		endFirst()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Seq != want {
				t.Fatalf("event %d after a cut call, want %d", ev.Seq, want)
			}
			want++
			if ev.Type == berth.EventTurnEnded {
				return
			}
		}
	}
}

// A stream goes on across a restart of the daemon: after the cut it
// reconnects with Last-Event-ID, reads the rest of the log (the session
// was stopped by the shutdown) and ends with io.EOF.
func TestStreamResumesAcrossADaemonRestart(t *testing.T) {
	home, err := os.MkdirTemp("", "berth-client-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	ctx := context.Background()
	d, err := openDaemon(ctx, home, false)
	if err != nil {
		t.Fatal(err)
	}
	c := daemonClient(t, d, client.WithReconnect(20*time.Millisecond, 200*time.Millisecond, 50))
	s, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Prompt(ctx, s.ID, berth.PromptRequest{Text: "echo before"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTurn(ctx, s.ID, res.TurnID); err != nil {
		t.Fatal(err)
	}
	st, err := c.StreamEvents(ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var seqs []int64
	var types []string
	read := func() error {
		evs, err := st.Next(ctx)
		for _, ev := range evs {
			seqs, types = append(seqs, ev.Seq), append(types, ev.Type)
		}
		return err
	}
	for len(types) == 0 || types[len(types)-1] != berth.EventTurnEnded {
		if err := read(); err != nil {
			t.Fatal(err)
		}
	}
	d.Close(ctx)
	if d, err = openDaemon(ctx, home, false); err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	for {
		err := read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("seqs %v: not 1..n", seqs)
		}
	}
	if types[len(types)-1] != berth.EventSessionStopped {
		t.Fatalf("the stream ended after %v, want session_stopped last", types)
	}
	if _, err := st.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after the end = %v, want io.EOF again", err)
	}
}

// roundTripper records the requests it answers with an empty health.
type roundTripper struct{ auth []string }

func (r *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	r.auth = append(r.auth, req.Header.Get("Authorization"))
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"status":"ok"}`)), Request: req}, nil
}

// New reads each form of address; the home's token goes to a loopback
// daemon only, unless WithToken says otherwise.
func TestNewAddressesAndTheHomeToken(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, client.TokenFile), []byte("home-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		addr, target, auth string
		opts               []client.Option
	}{
		{"127.0.0.1:7390", "http://127.0.0.1:7390", "Bearer home-token", nil},
		{"http://localhost:7390/", "http://localhost:7390", "Bearer home-token", nil},
		{"https://[::1]:7390", "https://[::1]:7390", "Bearer home-token", nil},
		{"berth.example:7380", "http://berth.example:7380", "", nil},
		{"10.0.0.1:7380", "http://10.0.0.1:7380", "Bearer given", []client.Option{client.WithToken("given")}},
		{"127.0.0.1:7390", "http://127.0.0.1:7390", "", []client.Option{client.WithToken("")}},
		{"", "http://" + client.DefaultAddr, "Bearer home-token", nil},
	} {
		rt := &roundTripper{}
		c, err := client.New(tt.addr, append([]client.Option{client.WithHome(home), client.WithTransport(rt)}, tt.opts...)...)
		if err != nil {
			t.Fatalf("New(%q): %v", tt.addr, err)
		}
		if c.Target() != tt.target {
			t.Errorf("New(%q).Target() = %q, want %q", tt.addr, c.Target(), tt.target)
		}
		if _, err := c.Health(ctx); err != nil || len(rt.auth) != 1 || rt.auth[0] != tt.auth {
			t.Errorf("New(%q) sent Authorization %q (%v), want %q", tt.addr, rt.auth, err, tt.auth)
		}
		c.Close()
	}
	for _, bad := range []string{"unix:", "ftp://host:1", "http://", "http://a b"} {
		if _, err := client.New(bad); berth.ErrorCode(err) != berth.EInvalid {
			t.Errorf("New(%q) = %v, want invalid", bad, err)
		}
	}
	// With a daemon's socket in the home, "" is that socket.
	d := startDaemon(t, true)
	c, err := client.New("", client.WithHome(d.Home()))
	if err != nil || c.Target() != d.Socket() {
		t.Fatalf("New(\"\") with a socket = %v, %v", c, err)
	}
	c.Close()
	// Over TCP, the daemon's own token is read from its home.
	c, err = client.New(d.Addr(), client.WithHome(d.Home()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListSessions(ctx, berth.SessionFilter{}); err != nil {
		t.Fatalf("TCP with the home's token: %v", err)
	}
	bare, _ := client.New(d.Addr(), client.WithToken(""))
	defer bare.Close()
	if _, err := bare.ListSessions(ctx, berth.SessionFilter{}); berth.ErrorCode(err) != berth.EUnauthenticated {
		t.Fatalf("TCP without a token = %v, want unauthenticated", err)
	}
}
