package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/host"
)

func TestFilesStayInsideTheWorkspace(t *testing.T) {
	e := newEnv(t)
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "etc-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "secret-link")); err != nil {
		t.Fatal(err)
	}
	s := e.create(berth.CreateRequest{Workspace: ws})

	for _, path := range []string{"../../etc/passwd", "etc-link/passwd", "secret-link", "/etc/hostname", filepath.Join(ws, "..", filepath.Base(outside), "secret")} {
		res := e.prompt(s.ID, "read "+path)
		if strings.Contains(res.Text, "root:") || strings.Contains(res.Text, "s3cret") || !strings.Contains(res.Text, "outside") {
			t.Errorf("read %s was not refused: %q", path, res.Text)
		}
	}
	for _, path := range []string{"../escape.txt", "etc-link/evil", "secret-link"} {
		e.prompt(s.ID, "write "+path+" pwned")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s3cret" {
		t.Fatalf("write through a symlink changed a file outside: %q", b)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escape.txt")); err == nil {
		t.Fatal("write with .. landed outside the workspace")
	}
	refused := ofType(e.events(s.ID), berth.EventFileRefused)
	if len(refused) != 8 {
		t.Fatalf("%d file_refused events, want 8", len(refused))
	}

	res := e.prompt(s.ID, "write sub/dir/notes.txt hello file\nread sub/dir/notes.txt")
	if !strings.Contains(res.Text, "hello file") {
		t.Fatalf("read back = %q", res.Text)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sub", "dir", "notes.txt")); err != nil || string(b) != "hello file" {
		t.Fatalf("written file = %q, %v", b, err)
	}
	evs := e.events(s.ID)
	if len(ofType(evs, berth.EventFileWritten)) != 1 || len(ofType(evs, berth.EventFileRead)) != 1 {
		t.Fatalf("file events = %v", types(evs))
	}
}

func TestTerminalsRunInTheWorkspace(t *testing.T) {
	e := newEnv(t)
	ws := t.TempDir()
	s := e.create(berth.CreateRequest{Workspace: ws})
	res := e.prompt(s.ID, "run pwd; echo out-$((6*7)); exit 3")
	if !strings.Contains(res.Text, ws) || !strings.Contains(res.Text, "out-42") || !strings.Contains(res.Text, "exit status 3") {
		t.Fatalf("run output = %q", res.Text)
	}
	evs := e.events(s.ID)
	exited := ofType(evs, berth.EventTerminalExited)
	if len(ofType(evs, berth.EventTerminalStarted)) != 1 || len(exited) != 1 {
		t.Fatalf("terminal events = %v", types(evs))
	}
	var d struct {
		ExitCode int `json:"exit_code"`
	}
	if err := json.Unmarshal(exited[0].Data, &d); err != nil || d.ExitCode != 3 {
		t.Fatalf("terminal_exited = %s", exited[0].Data)
	}
	// The agent's environment is filtered: the daemon's own variables stay out.
	t.Setenv("BERTH_TEST_SECRET", "leak")
	res = e.prompt(s.ID, `run echo "secret=[$BERTH_TEST_SECRET] home=$HOME"`)
	if strings.Contains(res.Text, "leak") || !strings.Contains(res.Text, filepath.Join(e.home, "sessions", s.ID, "home")) {
		t.Fatalf("agent environment = %q", res.Text)
	}
}

// The policies that answer an edit without asking (approve-reads asks:
// TestApproveReadsAsksForAnEdit).
func TestPermissionPolicies(t *testing.T) {
	e := newEnv(t)
	cases := map[string]string{
		berth.PermDenyAll:    "permission: rejected",
		berth.PermApproveAll: "permission: allow",
	}
	for mode, want := range cases {
		s := e.create(berth.CreateRequest{PermissionMode: mode})
		res := e.prompt(s.ID, "ask may I edit?")
		if !strings.Contains(res.Text, want) {
			t.Errorf("%s: %q, want %q", mode, res.Text, want)
		}
		evs := e.events(s.ID)
		req, resolved := ofType(evs, berth.EventPermissionRequested), ofType(evs, berth.EventPermissionResolved)
		if len(req) != 1 || len(resolved) != 1 || !strings.Contains(string(resolved[0].Data), `"decided_by":"policy"`) {
			t.Errorf("%s: permission events %v", mode, types(evs))
		}
	}
}

func TestStderrBecomesEvents(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "stderr warming up")
	waitFor(t, "the stderr event", func() bool {
		for _, ev := range ofType(e.events(s.ID), berth.EventAgentStderr) {
			if strings.Contains(string(ev.Data), "warming up") {
				return true
			}
		}
		return false
	})
}

// A reader that reconnects with the last seq it saw gets the rest of the
// log exactly once, even while the agent floods.
func TestStreamResumesWithoutGapOrDuplicateDuringAFlood(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "flood 20000 64"})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	after := int64(0)
	ended := false
	for round := 0; !ended; round++ {
		st, err := e.m.StreamEvents(ctx, s.ID, after)
		if err != nil {
			t.Fatal(err)
		}
		// Read a few batches, then drop the stream as a flaky client would.
		for range 3 {
			evs, err := st.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				got = append(got, ev.Seq)
				after = ev.Seq
				if ev.Type == berth.EventTurnEnded && ev.TurnID == r.TurnID {
					ended = true
				}
			}
			if ended {
				break
			}
		}
		st.Close()
	}
	for i, seq := range got {
		if seq != int64(i+1) {
			t.Fatalf("seq %d at position %d: gap or duplicate across reconnects", seq, i)
		}
	}
	if len(got) < 20000 {
		t.Fatalf("only %d events streamed", len(got))
	}
}

// Concurrent sessions do not disturb each other's logs.
func TestSessionsInParallel(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo"})
			if err != nil {
				errs <- err
				return
			}
			for j := range 3 {
				r, err := e.m.Prompt(context.Background(), s.ID, berth.PromptRequest{Text: "flood 500 32\necho done"})
				if err != nil {
					errs <- err
					return
				}
				res, err := e.m.WaitTurn(context.Background(), s.ID, r.TurnID)
				if err != nil || !strings.HasSuffix(res.Text, "done") {
					errs <- errors.New("bad turn result")
					return
				}
				_ = i + j
			}
			evs := e.events(s.ID)
			for k, ev := range evs {
				if ev.Seq != int64(k+1) || ev.SessionID != s.ID {
					errs <- errors.New("log of a parallel session is not contiguous")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestStreamOfAStoppedSessionEnds(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "echo x")
	if _, err := e.m.StopSession(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.m.StreamEvents(ctx, s.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	for {
		evs, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(evs)
	}
	if total := len(e.events(s.ID)); n != total-2 {
		t.Fatalf("stream gave %d events, want %d", n, total-2)
	}
}

func TestReconcileClosesSessionsLeftLive(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	r, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "run sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the terminal to start", func() bool { return len(ofType(e.events(s.ID), berth.EventTerminalStarted)) == 1 })
	// The agent and the terminal's shell and sleep, each carrying the session's id.
	left := sessionProcesses()[s.ID]
	if len(left) < 2 {
		t.Fatalf("processes of the session before the crash: %v", left)
	}
	// Simulate a daemon that died: its log and store stay as they were, the
	// agent is left running, and nothing closes the session.
	e.crash()

	got, err := e.m.GetSession(ctx, s.ID)
	if err != nil || got.State != berth.StateStopped || got.StopReason != berth.StopDaemonCrashed || !got.Resumable {
		t.Fatalf("after reconcile = %+v, %v", got, err)
	}
	for _, pid := range left {
		waitFor(t, "the leftover processes to die", func() bool { return processGone(pid) || isZombie(pid) })
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	tt := types(evs)
	if tt[len(tt)-1] != berth.EventSessionStopped || tt[len(tt)-2] != berth.EventTurnEnded || evs[len(evs)-2].TurnID != r.TurnID {
		t.Fatalf("log tail = %v", tt[len(tt)-3:])
	}
}

// isZombie reports whether pid is a zombie (killed, but its parent — the
// abandoned manager in this test process — has not reaped it yet).
func isZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(string(b[i+1:]), " Z")
}

// abandon lets an abandoned manager's goroutines finish: its agents are
// dead, so their monitors return once the store writes fail.
func abandon(m *Manager) {
	m.supervisor.stop()
	m.supervisor.running.Wait()
	rts := m.set.all()
	for _, ls := range rts {
		<-ls.Done()
	}
	m.changes.stopPublishing()
}

// ownedHost is the host provider claiming its sandboxes' files belong to
// uid, as a root daemon's bwrap does.
type ownedHost struct {
	berth.SandboxProvider
	uid int
}

func (o ownedHost) FileOwner() (int, int, bool) { return o.uid, o.uid, true }

// Under a root daemon, a file berth writes for the agent, and the
// directories it makes for it, belong to the sandbox's owner, so that the
// agent can change them; a file of another user keeps its owner.
func TestWrittenFilesBelongToTheAgent(t *testing.T) {
	testenv.NeedRoot(t, "only a root daemon gives files away")
	const uid = 123456
	e := newEnv(t, func(o *Options) { o.Providers = []berth.SandboxProvider{ownedHost{host.New(), uid}} })
	ws := t.TempDir()
	other := filepath.Join(ws, "other.txt")
	if err := os.WriteFile(other, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	s := e.create(berth.CreateRequest{Workspace: ws})
	e.prompt(s.ID, "write sub/dir/notes.txt hello")
	e.prompt(s.ID, "write other.txt changed")
	for _, p := range []string{"sub", "sub/dir", "sub/dir/notes.txt"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(ws, p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != uid || st.Gid != uid {
			t.Errorf("%s belongs to %d:%d, want %d", p, st.Uid, st.Gid, uid)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(other, &st); err != nil || st.Uid != 4242 {
		t.Errorf("another user's file changed hands: %d, %v", st.Uid, err)
	}
	if b, _ := os.ReadFile(other); string(b) != "changed" {
		t.Errorf("other.txt = %q", b)
	}
}
