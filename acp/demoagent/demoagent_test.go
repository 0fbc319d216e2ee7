package demoagent

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testenv"
	acp "github.com/coder/acp-go-sdk"
)

func TestInitialize(t *testing.T) {
	h := start(t)
	resp := h.initialize()
	if resp.ProtocolVersion != 1 {
		t.Errorf("protocolVersion = %d, want 1", resp.ProtocolVersion)
	}
	if !resp.AgentCapabilities.LoadSession {
		t.Error("loadSession capability not advertised")
	}
	if resp.AgentInfo == nil || resp.AgentInfo.Name != "berth-demo" || resp.AgentInfo.Version != "1" {
		t.Errorf("agentInfo = %+v", resp.AgentInfo)
	}
	if resp.AuthMethods == nil || len(resp.AuthMethods) != 0 {
		t.Errorf("authMethods = %#v, want empty list", resp.AuthMethods)
	}
}

func TestEchoLayout(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.mustPrompt(sid, "echo a\n\n  \nhello  world\r\necho b", acp.StopReasonEndTurn)
	var chunks []string
	for _, u := range h.client.sessionUpdates(sid) {
		if u.AgentMessageChunk == nil {
			t.Fatalf("unexpected update %+v", u)
		}
		chunks = append(chunks, u.AgentMessageChunk.Content.Text.Text)
	}
	want := []string{"a", "\nhello  world", "\nb"}
	if !slices.Equal(chunks, want) {
		t.Errorf("chunks = %q, want %q", chunks, want)
	}
	// The next turn starts a fresh layout.
	h.mustPrompt(sid, "echo c", acp.StopReasonEndTurn)
	if got := h.messages(sid); got != "a\nhello  world\nbc" {
		t.Errorf("messages = %q", got)
	}
}

func TestThink(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.mustPrompt(sid, "think one\necho said\nthink two", acp.StopReasonEndTurn)
	var thoughts []string
	for _, u := range h.client.sessionUpdates(sid) {
		if u.AgentThoughtChunk != nil {
			thoughts = append(thoughts, u.AgentThoughtChunk.Content.Text.Text)
		}
	}
	if !slices.Equal(thoughts, []string{"one", "\ntwo"}) {
		t.Errorf("thoughts = %q", thoughts)
	}
	if got := h.messages(sid); got != "said" {
		t.Errorf("messages = %q", got)
	}
}

// toolCalls returns the kinds of the tool_call updates and the last status
// of each tool call, in order.
func toolCalls(us []acp.SessionUpdate) (kinds []acp.ToolKind, final []acp.ToolCallStatus) {
	idx := map[acp.ToolCallId]int{}
	for _, u := range us {
		switch {
		case u.ToolCall != nil:
			idx[u.ToolCall.ToolCallId] = len(kinds)
			kinds = append(kinds, u.ToolCall.Kind)
			final = append(final, u.ToolCall.Status)
		case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
			i, ok := idx[u.ToolCallUpdate.ToolCallId]
			if !ok {
				panic("tool_call_update before tool_call")
			}
			final[i] = *u.ToolCallUpdate.Status
		}
	}
	return kinds, final
}

func TestWriteReadRoundTrip(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.mustPrompt(sid, "write sub/f.txt hello  world\nread sub/f.txt", acp.StopReasonEndTurn)

	b, err := os.ReadFile(filepath.Join(h.root, "sub", "f.txt"))
	if err != nil || string(b) != "hello  world" {
		t.Fatalf("file = %q, %v", b, err)
	}
	h.client.mu.Lock()
	writes := slices.Clone(h.client.writes)
	h.client.mu.Unlock()
	if len(writes) != 1 || writes[0].Path != filepath.Join(h.root, "sub/f.txt") || writes[0].SessionId != sid {
		t.Errorf("writes = %+v", writes)
	}
	if got := h.messages(sid); got != "wrote sub/f.txt\nhello  world" {
		t.Errorf("messages = %q", got)
	}
	kinds, final := toolCalls(h.client.sessionUpdates(sid))
	if !slices.Equal(kinds, []acp.ToolKind{acp.ToolKindEdit, acp.ToolKindRead}) {
		t.Errorf("tool kinds = %v", kinds)
	}
	if !slices.Equal(final, []acp.ToolCallStatus{acp.ToolCallStatusCompleted, acp.ToolCallStatusCompleted}) {
		t.Errorf("tool statuses = %v", final)
	}
}

func TestWriteReadRefused(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.client.mu.Lock()
	h.client.refuseWrite = true
	h.client.mu.Unlock()
	h.mustPrompt(sid, "write f.txt x\nread missing.txt\necho still here", acp.StopReasonEndTurn)
	msgs := h.messages(sid)
	if !strings.HasPrefix(msgs, "write f.txt: write refused by test client\nread missing.txt: ") || !strings.HasSuffix(msgs, "\nstill here") {
		t.Errorf("messages = %q", msgs)
	}
	_, final := toolCalls(h.client.sessionUpdates(sid))
	if !slices.Equal(final, []acp.ToolCallStatus{acp.ToolCallStatusFailed, acp.ToolCallStatusFailed}) {
		t.Errorf("tool statuses = %v", final)
	}
}

func TestToolsNeedClientCapabilities(t *testing.T) {
	h := start(t)
	if _, err := h.conn.Initialize(ctxT(t), acp.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: h.root, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	h.mustPrompt(resp.SessionId, "write f x\nread f\nrun true", acp.StopReasonEndTurn)
	want := "write f: client does not support fs/write_text_file\nread f: client does not support fs/read_text_file\nrun: client does not support terminals"
	if got := h.messages(resp.SessionId); got != want {
		t.Errorf("messages = %q", got)
	}
}

func TestRun(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.mustPrompt(sid, "run echo hi\nrun pwd; exit 3", acp.StopReasonEndTurn)
	if got, want := h.messages(sid), "hi\n"+h.root+"\nexit status 3"; got != want {
		t.Errorf("messages = %q, want %q", got, want)
	}
	h.client.mu.Lock()
	reqs := slices.Clone(h.client.termReqs)
	released := h.client.released
	h.client.mu.Unlock()
	if len(reqs) != 2 || reqs[0].Command != "sh" || !slices.Equal(reqs[0].Args, []string{"-c", "echo hi"}) ||
		reqs[0].Cwd == nil || *reqs[0].Cwd != h.root {
		t.Errorf("terminal requests = %+v", reqs)
	}
	if released != 2 {
		t.Errorf("released %d terminals, want 2", released)
	}
	kinds, final := toolCalls(h.client.sessionUpdates(sid))
	if !slices.Equal(kinds, []acp.ToolKind{acp.ToolKindExecute, acp.ToolKindExecute}) ||
		!slices.Equal(final, []acp.ToolCallStatus{acp.ToolCallStatusCompleted, acp.ToolCallStatusFailed}) {
		t.Errorf("tool calls = %v %v", kinds, final)
	}
}

func TestRunCancel(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	var reason acp.StopReason
	var perr error
	wait := h.async(func() { reason, perr = h.prompt(ctxT(t), sid, "run sleep 30") })
	waitFor(t, "terminal", func() bool {
		h.client.mu.Lock()
		defer h.client.mu.Unlock()
		return len(h.client.termReqs) == 1
	})
	if err := h.conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	wait()
	if perr != nil || reason != acp.StopReasonCancelled {
		t.Fatalf("prompt = %q, %v", reason, perr)
	}
	// Releasing the terminal is the last thing the turn does.
	h.client.mu.Lock()
	released := h.client.released
	h.client.mu.Unlock()
	if released != 1 {
		t.Errorf("released %d terminals, want 1", released)
	}
}

func TestAsk(t *testing.T) {
	for _, tc := range []struct {
		outcome acp.RequestPermissionOutcome
		msg     string
		reason  acp.StopReason
		status  acp.ToolCallStatus
	}{
		{acp.NewRequestPermissionOutcomeSelected("allow"), "permission: allow\nafter", acp.StopReasonEndTurn, acp.ToolCallStatusCompleted},
		{acp.NewRequestPermissionOutcomeSelected("allow_always"), "permission: allow_always\nafter", acp.StopReasonEndTurn, acp.ToolCallStatusCompleted},
		{acp.NewRequestPermissionOutcomeSelected("reject"), "permission: rejected\nafter", acp.StopReasonEndTurn, acp.ToolCallStatusFailed},
		{acp.NewRequestPermissionOutcomeCancelled(), "permission: cancelled", acp.StopReasonCancelled, acp.ToolCallStatusFailed},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			h := start(t)
			sid := h.newSession()
			h.client.permission = func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
				return acp.RequestPermissionResponse{Outcome: tc.outcome}, nil
			}
			h.mustPrompt(sid, "ask delete everything\necho after", tc.reason)
			if got := h.messages(sid); got != tc.msg {
				t.Errorf("messages = %q, want %q", got, tc.msg)
			}
			h.client.mu.Lock()
			reqs := slices.Clone(h.client.permReqs)
			h.client.mu.Unlock()
			if len(reqs) != 1 {
				t.Fatalf("%d permission requests", len(reqs))
			}
			r := reqs[0]
			if r.SessionId != sid || r.ToolCall.Title == nil || *r.ToolCall.Title != "delete everything" ||
				r.ToolCall.Kind == nil || *r.ToolCall.Kind != acp.ToolKindEdit {
				t.Errorf("permission request = %+v", r)
			}
			var opts []string
			for _, o := range r.Options {
				opts = append(opts, string(o.Kind)+"/"+o.Name+"/"+string(o.OptionId))
			}
			if want := []string{"allow_once/Allow/allow", "allow_always/Always allow/allow_always", "reject_once/Reject/reject"}; !slices.Equal(opts, want) {
				t.Errorf("options = %q", opts)
			}
			kinds, final := toolCalls(h.client.sessionUpdates(sid))
			if !slices.Equal(kinds, []acp.ToolKind{acp.ToolKindEdit}) || final[0] != tc.status {
				t.Errorf("tool calls = %v %v", kinds, final)
			}
		})
	}
}

// A session/cancel while a permission is pending: the client answers
// cancelled (as ACP requires) and the turn ends cancelled.
func TestAskThenSessionCancel(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	answer := make(chan struct{})
	h.client.permission = func(ctx context.Context, _ acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		<-answer
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
	var reason acp.StopReason
	var perr error
	wait := h.async(func() { reason, perr = h.prompt(ctxT(t), sid, "ask ok?\necho never") })
	waitFor(t, "permission request", func() bool {
		h.client.mu.Lock()
		defer h.client.mu.Unlock()
		return len(h.client.permReqs) == 1
	})
	if err := h.conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	close(answer)
	wait()
	if perr != nil || reason != acp.StopReasonCancelled {
		t.Fatalf("prompt = %q, %v", reason, perr)
	}
	if got := h.messages(sid); got != "permission: cancelled" {
		t.Errorf("messages = %q", got)
	}
}

func TestSleepDots(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	t0 := time.Now()
	h.mustPrompt(sid, "sleep 250\necho done", acp.StopReasonEndTurn)
	if d := time.Since(t0); d < 250*time.Millisecond {
		t.Errorf("sleep 250 took %v", d)
	}
	if got := h.messages(sid); got != "..\ndone" {
		t.Errorf("messages = %q", got)
	}
}

func TestSleepCancel(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	var reason acp.StopReason
	var perr error
	wait := h.async(func() { reason, perr = h.prompt(ctxT(t), sid, "sleep 20000\necho never") })
	waitFor(t, "a sleep chunk", func() bool { return strings.Contains(h.messages(sid), ".") })
	t0 := time.Now()
	if err := h.conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	wait()
	if d := time.Since(t0); d > time.Second {
		t.Errorf("cancel took %v", d)
	}
	if perr != nil || reason != acp.StopReasonCancelled {
		t.Fatalf("prompt = %q, %v", reason, perr)
	}
	if strings.Contains(h.messages(sid), "never") {
		t.Error("turn went on after cancel")
	}
	// The session stays usable.
	h.mustPrompt(sid, "echo again", acp.StopReasonEndTurn)
}

func TestFlood(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.mustPrompt(sid, "flood 1000 64\necho end", acp.StopReasonEndTurn)
	chunk := strings.Repeat("x", 64)
	n := 0
	for _, u := range h.client.sessionUpdates(sid) {
		if u.AgentMessageChunk == nil {
			t.Fatalf("unexpected update %+v", u)
		}
		if text := u.AgentMessageChunk.Content.Text.Text; text == chunk {
			n++
		} else if text != "\nend" {
			t.Fatalf("unexpected chunk %q", text)
		}
	}
	if n != 1000 {
		t.Errorf("got %d flood chunks, want 1000", n)
	}
}

// A client that goes away mid-flood makes the agent's writes fail; the turn
// ends and Main returns once stdin closes.
func TestClientGoneMidFlood(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	var perr error
	wait := h.async(func() { _, perr = h.prompt(ctxT(t), sid, "flood 100000000 1") })
	waitFor(t, "flood chunks", func() bool { return len(h.client.sessionUpdates(sid)) > 100 })
	_ = h.outR.CloseWithError(io.ErrClosedPipe)
	wait()
	if perr == nil {
		t.Error("prompt succeeded without a client")
	}
	h.stop()
}

func TestPlanAndUsage(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.mustPrompt(sid, "plan A| B |C\nusage 1200 200000", acp.StopReasonEndTurn)
	us := h.client.sessionUpdates(sid)
	if len(us) != 2 || us[0].Plan == nil || us[1].UsageUpdate == nil {
		t.Fatalf("updates = %+v", us)
	}
	var entries []string
	for _, e := range us[0].Plan.Entries {
		entries = append(entries, e.Content+"/"+string(e.Status)+"/"+string(e.Priority))
	}
	if want := []string{"A/pending/medium", "B/pending/medium", "C/pending/medium"}; !slices.Equal(entries, want) {
		t.Errorf("plan = %q", entries)
	}
	if u := us[1].UsageUpdate; u.Used != 1200 || u.Size != 200000 {
		t.Errorf("usage = %+v", u)
	}
}

func TestStderr(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.mustPrompt(sid, "stderr something broke", acp.StopReasonEndTurn)
	if got := h.stderr.String(); !strings.Contains(got, "something broke\n") {
		t.Errorf("stderr = %q", got)
	}
	if got := h.messages(sid); got != "" {
		t.Errorf("messages = %q", got)
	}
}

func TestCrash(t *testing.T) {
	var mu sync.Mutex
	var codes []int
	old := exit
	exit = func(code int) {
		mu.Lock()
		defer mu.Unlock()
		codes = append(codes, code)
	}
	t.Cleanup(func() { exit = old })

	h := start(t)
	sid := h.newSession()
	if _, err := h.prompt(ctxT(t), sid, "echo before\ncrash 3\necho after"); err == nil {
		t.Error("prompt after crash succeeded")
	}
	if _, err := h.prompt(ctxT(t), sid, "crash"); err == nil {
		t.Error("prompt after crash succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(codes, []int{3, 1}) {
		t.Errorf("exit codes = %v, want [3 1]", codes)
	}
	if got := h.messages(sid); got != "before" {
		t.Errorf("messages = %q", got)
	}
}

func TestHang(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var perr error
	wait := h.async(func() { _, perr = h.prompt(ctx, sid, "echo before\nhang\necho after") })
	waitFor(t, "the message before hang", func() bool { return h.messages(sid) == "before" })
	// session/cancel does not end a hung prompt.
	if err := h.conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	wait()
	if perr == nil {
		t.Fatal("hung prompt answered")
	}
	// Nothing else is answered either.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel2()
	if _, err := h.conn.NewSession(ctx2, acp.NewSessionRequest{Cwd: h.root, McpServers: []acp.McpServer{}}); err == nil {
		t.Error("hung agent answered session/new")
	}
	if got := h.messages(sid); got != "before" {
		t.Errorf("messages = %q", got)
	}
}

func TestLoadReplaysFromStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	h1 := start(t, "--state-dir", dir)
	sid := h1.newSession()
	h1.mustPrompt(sid, "echo a\nthink t\nhello\nflood 3 2", acp.StopReasonEndTurn)

	// The history is written as the turn happens.
	var reason acp.StopReason
	wait := h1.async(func() { reason, _ = h1.prompt(ctxT(t), sid, "echo mid\nsleep 20000") })
	waitFor(t, "a sleep chunk", func() bool { return strings.HasSuffix(h1.messages(sid), ".") })
	b, err := os.ReadFile(filepath.Join(dir, string(sid)+".jsonl"))
	if err != nil || !strings.Contains(string(b), `"text":"mid"`) {
		t.Fatalf("history during the turn = %q, %v", b, err)
	}
	if err := h1.conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	wait()
	if reason != acp.StopReasonCancelled {
		t.Fatalf("stop reason %q", reason)
	}
	h1.stop()

	// A fresh agent on the same state dir.
	h2 := start(t, "--state-dir", dir)
	h2.initialize()
	if _, err := h2.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: h2.root, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	var got []string
	for _, u := range h2.client.sessionUpdates(sid) {
		switch {
		case u.UserMessageChunk != nil:
			got = append(got, "user:"+u.UserMessageChunk.Content.Text.Text)
		case u.AgentMessageChunk != nil:
			got = append(got, "agent:"+u.AgentMessageChunk.Content.Text.Text)
		case u.AgentThoughtChunk != nil:
			got = append(got, "thought:"+u.AgentThoughtChunk.Content.Text.Text)
		default:
			t.Errorf("unexpected replayed update %+v", u)
		}
	}
	// Consecutive chunks of one kind are coalesced on replay.
	want := []string{
		"user:echo a\nthink t\nhello\nflood 3 2", "agent:a", "thought:t", "agent:\nhelloxxxxxx",
		"user:echo mid\nsleep 20000", "agent:mid.",
	}
	// The sleep may have sent more dots before the cancel landed.
	if n := len(got); n > 0 {
		got[n-1] = strings.TrimRight(got[n-1], ".") + "."
	}
	if !slices.Equal(got, want) {
		t.Errorf("replay = %q\nwant     %q", got, want)
	}

	// The loaded session is usable, with the new cwd.
	h2.mustPrompt(sid, "write new.txt n", acp.StopReasonEndTurn)
	if _, err := os.Stat(filepath.Join(h2.root, "new.txt")); err != nil {
		t.Errorf("write after load: %v", err)
	}
	h2.stop()

	// And what it said after the load is stored too.
	h3 := start(t, "--state-dir", dir)
	h3.initialize()
	if _, err := h3.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: h3.root, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("second session/load: %v", err)
	}
	if m := h3.messages(sid); !strings.HasSuffix(m, "wrote new.txt") {
		t.Errorf("second replay messages = %q", m)
	}
}

// wantCode fails unless err is a JSON-RPC error with code.
func wantCode(t *testing.T, err error, code int) {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != code {
		t.Errorf("error = %v, want JSON-RPC code %d", err, code)
	}
}

func TestLoadUnknown(t *testing.T) {
	for _, args := range [][]string{nil, {"--state-dir", t.TempDir()}} {
		h := start(t, args...)
		h.initialize()
		for _, id := range []acp.SessionId{"demo-0000", "../../etc/passwd"} {
			_, err := h.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: id, Cwd: h.root, McpServers: []acp.McpServer{}})
			wantCode(t, err, codeResourceNotFound)
		}
	}
}

func TestLoadInMemory(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	h.mustPrompt(sid, "echo one\nflood 100 1000", acp.StopReasonEndTurn)
	live := len(h.client.sessionUpdates(sid))
	if _, err := h.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: h.root, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	us := h.client.sessionUpdates(sid)[live:]
	if len(us) != 3 || us[0].UserMessageChunk == nil || us[0].UserMessageChunk.Content.Text.Text != "echo one\nflood 100 1000" {
		t.Fatalf("replay = %+v", us)
	}
	// 100 KB of flood comes back in two notifications of at most 64 KiB.
	var text string
	for _, u := range us[1:] {
		if u.AgentMessageChunk == nil || len(u.AgentMessageChunk.Content.Text.Text) > replayChunk {
			t.Fatalf("replayed update %+v", u)
		}
		text += u.AgentMessageChunk.Content.Text.Text
	}
	if text != "one"+strings.Repeat("x", 100000) {
		t.Errorf("replayed text differs (%d bytes)", len(text))
	}
}

func TestProtocolErrors(t *testing.T) {
	h := start(t)
	sid := h.newSession()
	_, err := h.conn.SetSessionMode(ctxT(t), acp.SetSessionModeRequest{SessionId: sid, ModeId: "x"})
	wantCode(t, err, -32602)
	_, err = h.prompt(ctxT(t), "demo-nope", "echo x")
	wantCode(t, err, codeResourceNotFound)
	_, err = h.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: "relative", McpServers: []acp.McpServer{}})
	wantCode(t, err, -32602)
}

func TestMainFlagsAndEOF(t *testing.T) {
	var stderr testenv.Buffer
	if code := Main([]string{"--bogus"}, strings.NewReader(""), &testenv.Buffer{}, &stderr); code != 2 {
		t.Errorf("bad flag: exit %d", code)
	}
	if code := Main([]string{"extra"}, strings.NewReader(""), &testenv.Buffer{}, &stderr); code != 2 {
		t.Errorf("extra arg: exit %d", code)
	}
	dir := filepath.Join(t.TempDir(), "a", "b")
	if code := Main([]string{"--state-dir", dir}, strings.NewReader(""), &testenv.Buffer{}, &stderr); code != 0 {
		t.Errorf("EOF on stdin: exit %d", code)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Errorf("state dir not created: %v", err)
	}
}
