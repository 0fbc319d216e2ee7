package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/rawsock"
)

// nLine is the i-th line the counting agent prints.
func nLine(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":{"i":%d}}`+"\n", i)
}

// countScript prints nLine(1..n) then sleeps.
func countScript(n int) string {
	return fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"i\":$i}}"; i=$((i+1)); done; exec sleep 30`, n)
}

// echoScript echoes every stdin line as "got LINE".
const echoScript = `while read -r line; do echo "got $line"; done`

func TestStreamAndReplay(t *testing.T) {
	const n = 500
	var all strings.Builder
	ends := make([]int64, n+1) // ends[i] is the offset just past line i
	for i := 1; i <= n; i++ {
		all.WriteString(nLine(i))
		ends[i] = int64(all.Len())
	}
	want := []byte(all.String())
	total := int64(len(want))

	h := serve(t, newConfig(t, countScript(n)))
	d := h.attach(0)
	if hl := d.Hello(); hl.From != 0 || hl.SessionID != "sess-1" || hl.AgentPID != h.ready.AgentPID || hl.ShimPID != os.Getpid() || hl.Exited != nil {
		t.Errorf("first hello: %+v", hl)
	}
	if hl := d.Hello(); hl.End < 0 || hl.End > total {
		t.Errorf("first hello End %d out of [0,%d]", hl.End, total)
	}
	if d.Pid() != h.ready.AgentPID || d.ShimPID() != os.Getpid() {
		t.Errorf("Pid %d ShimPID %d, ready %+v", d.Pid(), d.ShimPID(), h.ready)
	}
	got := d.waitOut(int(total))
	if !bytes.Equal(got, want) {
		t.Fatalf("stdout from 0: %d bytes, want %d; differs", len(got), len(want))
	}
	d.Detach()
	if _, err := d.wait(); !errors.Is(err, ErrDetached) {
		t.Errorf("Wait after Detach: %v, want ErrDetached", err)
	}

	// Replay from the end of line 200: exactly the tail.
	mid := ends[200]
	d2 := h.attach(mid)
	hl := d2.Hello()
	if hl.From != mid || hl.End != total {
		t.Errorf("hello from %d: From %d End %d, want %d %d", mid, hl.From, hl.End, mid, total)
	}
	if len(hl.Requests) != 0 || len(hl.Calls) != 0 || hl.LastID != 0 {
		t.Errorf("notifications were taken for requests: %+v", hl)
	}
	got = d2.waitOut(int(total - mid))
	if !bytes.Equal(got, want[mid:]) {
		t.Fatalf("stdout from %d: %q..., want %q...", mid, got[:min(len(got), 60)], want[mid:mid+60])
	}
	d2.Detach()

	// What the daemon said it had may be dropped: a later attach from 0
	// starts at the spool's start (the page-aligned offset when the file
	// system can punch holes), and the stream matches what it says.
	d3 := h.attach(0)
	hl = d3.Hello()
	if aligned := mid &^ 4095; hl.From != 0 && hl.From != aligned {
		t.Errorf("hello from 0 after an attach from %d: From %d, want 0 or %d", mid, hl.From, aligned)
	}
	t.Logf("spool start after the attach from %d: %d", mid, hl.From)
	if hl.End != total {
		t.Errorf("End %d, want %d", hl.End, total)
	}
	got = d3.waitOut(int(total - hl.From))
	if !bytes.Equal(got, want[hl.From:]) {
		t.Errorf("stdout from %d differs from what the agent wrote there", hl.From)
	}
	d3.Detach()

	// An offset past the end is clamped to it.
	d4 := h.attach(total + 10)
	if hl := d4.Hello(); hl.From != total || hl.End != total {
		t.Errorf("hello from past the end: From %d End %d, want %d", hl.From, hl.End, total)
	}
	d4.Detach()
	if out := d4.allOut(); len(out) != 0 {
		t.Errorf("stdout from the end: %q", out)
	}
}

func TestBase(t *testing.T) {
	const base = 1000
	cfg := newConfig(t, `echo a; echo '{"jsonrpc":"2.0","id":1,"method":"m/x","params":{}}'; exec sleep 30`)
	cfg.Base = base
	req := `{"jsonrpc":"2.0","id":1,"method":"m/x","params":{}}`
	want := "a\n" + req + "\n"
	end := int64(base + len(want))
	h := serve(t, cfg)

	d := h.attach(0)
	if hl := d.Hello(); hl.From != base {
		t.Errorf("hello from 0: From %d, want %d", hl.From, base)
	}
	if got := d.waitOut(len(want)); string(got) != want {
		t.Fatalf("stdout from 0: %q, want %q", got, want)
	}
	d.Detach()

	d = h.attach(base)
	hl := d.Hello()
	if hl.From != base || hl.End != end {
		t.Errorf("hello from %d: From %d End %d, want %d %d", base, hl.From, hl.End, base, end)
	}
	if len(hl.Requests) != 1 || hl.Requests[0].End != end || string(hl.Requests[0].Line) != req {
		t.Errorf("requests: %+v, want one ending at %d", hl.Requests, end)
	}
	if got := d.waitOut(len(want)); string(got) != want {
		t.Fatalf("stdout from %d: %q, want %q", base, got, want)
	}
	d.Detach()

	d = h.attach(base + 2)
	if hl := d.Hello(); hl.From != base+2 || hl.End != end {
		t.Errorf("hello from %d: From %d End %d", base+2, hl.From, hl.End)
	}
	if got := d.waitOut(len(req) + 1); string(got) != req+"\n" {
		t.Fatalf("stdout from %d: %q", base+2, got)
	}
	d.Detach()
}

// A request line the agent writes in two pieces is still seen whole.
func TestSplitLineTracking(t *testing.T) {
	const req = `{"jsonrpc":"2.0","id":5,"method":"m/split","params":{}}`
	h := serve(t, newConfig(t, `printf 'note\n{"jsonrpc":"2.0",'; sleep 0.3; printf '"id":5,"method":"m/split"'; sleep 0.3; printf ',"params":{}}\n'; exec sleep 30`))
	want := "note\n" + req + "\n"
	d := h.attach(0)
	if got := d.waitOut(len(want)); string(got) != want {
		t.Fatalf("stdout %q", got)
	}
	d.Detach()
	d = h.attach(0)
	wantReqs := []Request{{End: int64(len(want)), Line: json.RawMessage(req)}}
	if hl := d.Hello(); !equalRequests(hl.Requests, wantReqs) {
		t.Errorf("requests: %s, want %s", showRequests(hl.Requests), showRequests(wantReqs))
	}
	d.Detach()
}

// The agent's unanswered requests come in the order it sent them.
func TestRequestsInOrder(t *testing.T) {
	var script, want strings.Builder
	var wantReqs []Request
	for id := 30; id > 20; id-- {
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"m/x","params":{}}`, id)
		script.WriteString("echo '" + line + "'; ")
		want.WriteString(line + "\n")
		wantReqs = append(wantReqs, Request{End: int64(want.Len()), Line: json.RawMessage(line)})
	}
	script.WriteString("exec sleep 30")
	h := serve(t, newConfig(t, script.String()))
	d := h.attach(0)
	d.waitOut(want.Len())
	d.Detach()
	d = h.attach(0)
	if hl := d.Hello(); !equalRequests(hl.Requests, wantReqs) {
		t.Errorf("requests: %s, want %s", showRequests(hl.Requests), showRequests(wantReqs))
	}
	d.Detach()
}

// Output the agent writes while a daemon is still being sent the spool
// comes after it, in order.
func TestLiveOutputDuringReplay(t *testing.T) {
	const big = 3_000_000
	h := serve(t, newConfig(t, fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x; echo; %s`, big, echoScript)))
	d := h.attach(0)
	d.waitOut(big + 1)
	d.Detach()

	d = h.attach(0)
	var want strings.Builder
	want.WriteString(strings.Repeat("x", big) + "\n")
	for i := 1; i <= 20; i++ {
		d.write(fmt.Sprintf("ping %d\n", i))
		want.WriteString(fmt.Sprintf("got ping %d\n", i))
	}
	got := d.waitOut(want.Len())
	if string(got) != want.String() {
		i := 0
		for i < len(got) && i < want.Len() && got[i] == want.String()[i] {
			i++
		}
		t.Errorf("stdout differs at byte %d of %d: %q", i, len(got), got[i:min(len(got), i+40)])
	}
	d.Detach()
}

func TestStdinAndRequestTracking(t *testing.T) {
	const (
		req3  = `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{}}`
		resp3 = `{"jsonrpc":"2.0","id":3,"result":{}}`
		req8  = `{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{}}`
		req7  = `{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{}}`
		resp7 = `{"jsonrpc":"2.0","id":7,"result":{}}`
		req2  = `{"jsonrpc":"2.0","id":2,"method":"x/two","params":{}}`
		reqA  = `{"jsonrpc":"2.0","id":"a","method":"x/a","params":{}}`
		req9  = `{"jsonrpc":"2.0","id":9,"method":"x/nine","params":{}}`
		resp9 = `{"jsonrpc":"2.0","id":9,"result":{}}`
	)
	// The agent answers the first line it reads (the prompt), sends two
	// requests of its own, then answers id 9 and echoes the rest as text.
	script := `read -r line
echo '` + resp3 + `'
echo '` + req8 + `'
echo '` + req7 + `'
while read -r line; do
  case "$line" in
    *'"id":9,'*) echo '` + resp9 + `' ;;
    *) echo "got $line" ;;
  esac
done`
	h := serve(t, newConfig(t, script))
	first := resp3 + "\n" + req8 + "\n" + req7 + "\n"
	resp3End := int64(len(resp3) + 1)
	req8End := resp3End + int64(len(req8)+1)
	req7End := int64(len(first))

	d := h.attach(0)
	if hl := d.Hello(); len(hl.Calls) != 0 || len(hl.Requests) != 0 || hl.LastID != 0 {
		t.Errorf("hello before any traffic: %+v", hl)
	}
	d.write(req3 + "\n")
	if got := d.waitOut(len(first)); string(got) != first {
		t.Fatalf("stdout: %q, want %q", got, first)
	}
	d.Detach()

	d = h.attach(0)
	hl := d.Hello()
	wantCalls := []Call{{ID: json.RawMessage(`3`), Method: "session/prompt", AnsweredAt: resp3End}}
	if !equalCalls(hl.Calls, wantCalls) {
		t.Errorf("calls: %s, want %s", showCalls(hl.Calls), showCalls(wantCalls))
	}
	wantReqs := []Request{{End: req8End, Line: json.RawMessage(req8)}, {End: req7End, Line: json.RawMessage(req7)}}
	if !equalRequests(hl.Requests, wantReqs) {
		t.Errorf("requests: %s, want %s", showRequests(hl.Requests), showRequests(wantReqs))
	}
	if hl.LastID != 3 {
		t.Errorf("LastID %d, want 3", hl.LastID)
	}
	if got := d.waitOut(len(first)); string(got) != first {
		t.Errorf("replay from 0: %q", got)
	}
	// Two requests in one frame; neither a string id nor a lower one
	// moves LastID.
	d.write(req2 + "\n" + reqA + "\n")
	d.barrier("1")
	d.Detach()

	// Attaching from past the answer says the daemon has it: the call goes.
	d = h.attach(resp3End)
	hl = d.Hello()
	if hl.From != resp3End {
		t.Errorf("From %d, want %d", hl.From, resp3End)
	}
	wantCalls = []Call{{ID: json.RawMessage(`"a"`), Method: "x/a"}, {ID: json.RawMessage(`2`), Method: "x/two"}}
	if !equalCalls(hl.Calls, wantCalls) {
		t.Errorf("calls after attaching from %d: %s, want %s", resp3End, showCalls(hl.Calls), showCalls(wantCalls))
	}
	if hl.LastID != 3 {
		t.Errorf("LastID %d, want 3", hl.LastID)
	}
	if got := d.waitOut(int(req7End - resp3End)); !bytes.HasPrefix(got, []byte(first[resp3End:])) {
		t.Errorf("stdout from %d: %q", resp3End, got)
	}

	// A call answered later is kept until an ack covers its answer.
	d.write(req9 + "\n")
	out := d.waitOutContains(resp9 + "\n")
	resp9End := d.Hello().From + int64(bytes.Index(out, []byte(resp9+"\n"))+len(resp9)+1)
	if err := d.Ack(resp9End - 1); err != nil {
		t.Fatal(err)
	}
	d.barrier("2")
	d.Detach()

	d = h.attach(0)
	hl = d.Hello()
	wantCalls = append(wantCalls, Call{ID: json.RawMessage(`9`), Method: "x/nine", AnsweredAt: resp9End})
	if !equalCalls(hl.Calls, wantCalls) {
		t.Errorf("calls after an ack short of the answer: %s, want %s", showCalls(hl.Calls), showCalls(wantCalls))
	}
	if hl.LastID != 9 {
		t.Errorf("LastID %d, want 9", hl.LastID)
	}
	if err := d.Ack(resp9End); err != nil {
		t.Fatal(err)
	}
	// The daemon answers the agent's request 7.
	d.write(resp7 + "\n")
	d.barrier("3")
	d.Detach()

	d = h.attach(0)
	hl = d.Hello()
	wantCalls = wantCalls[:2]
	if !equalCalls(hl.Calls, wantCalls) {
		t.Errorf("calls after the ack: %s, want %s", showCalls(hl.Calls), showCalls(wantCalls))
	}
	wantReqs = wantReqs[:1]
	if !equalRequests(hl.Requests, wantReqs) {
		t.Errorf("requests after the answer to 7: %s, want %s", showRequests(hl.Requests), showRequests(wantReqs))
	}
	d.Detach()
}

func equalCalls(a, b []Call) bool {
	return slices.EqualFunc(a, b, func(x, y Call) bool {
		return bytes.Equal(x.ID, y.ID) && x.Method == y.Method && x.AnsweredAt == y.AnsweredAt
	})
}

func showCalls(cs []Call) string {
	var s []string
	for _, c := range cs {
		s = append(s, fmt.Sprintf("{%s %s %d}", c.ID, c.Method, c.AnsweredAt))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func equalRequests(a, b []Request) bool {
	return slices.EqualFunc(a, b, func(x, y Request) bool { return x.End == y.End && bytes.Equal(x.Line, y.Line) })
}

func showRequests(rs []Request) string {
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprintf("{%d %s}", r.End, r.Line))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func TestExit(t *testing.T) {
	h := serve(t, newConfig(t, `echo hi; exit 3`))
	d := h.attach(0)
	if out := d.allOut(); string(out) != "hi\n" {
		t.Errorf("stdout %q, want %q", out, "hi\n")
	}
	st, err := d.wait()
	if err != nil || st != (berth.ExitStatus{Code: 3}) {
		t.Fatalf("Wait: %+v, %v; want code 3", st, err)
	}
	// Closing stdin once the agent is done is a no-op.
	if err := d.Stdin().Close(); err != nil {
		t.Errorf("stdin Close after the exit: %v", err)
	}
	d.Release()
	if err := h.waitServe(long); err != nil {
		t.Errorf("Serve: %v", err)
	}
	assertGone(t, h.cfg)
	waitGroupGone(t, h.ready.AgentPID)
}

func TestExitWhileDetached(t *testing.T) {
	h := serve(t, newConfig(t, `echo hi; echo oops >&2; sleep 0.2; echo there; exit 5`))
	pid := h.ready.AgentPID
	eventually(t, "the agent to be reaped", func() bool { return procState(pid) == "" })
	// The exit is recorded just after the reaping, and the stdout pump may
	// reach the pipe's end just after that: an attach in between is let go
	// and another tried. What stderr such an attempt got is counted with
	// the rest.
	var d *daemon
	var stderr []byte
	eventually(t, "a hello that reports the exit and all of stdout", func() bool {
		d = h.attach(0)
		if hl := d.Hello(); hl.Exited != nil && hl.End == int64(len("hi\nthere\n")) {
			return true
		}
		if len(stderr) == 0 {
			// The kept stderr follows the hello: detaching before it is
			// read would drop it (it is the shim's to give once).
			eventually(t, "the kept stderr", func() bool { return d.errOut.Len() > 0 })
		}
		d.Detach()
		stderr = append(stderr, d.allErr()...)
		return false
	})
	hl := d.Hello()
	if *hl.Exited != (berth.ExitStatus{Code: 5}) || hl.End != int64(len("hi\nthere\n")) {
		t.Errorf("hello: exited %+v end %d", *hl.Exited, hl.End)
	}
	if out := d.allOut(); string(out) != "hi\nthere\n" {
		t.Errorf("stdout %q", out)
	}
	if st, err := d.wait(); err != nil || st != (berth.ExitStatus{Code: 5}) {
		t.Errorf("Wait: %+v, %v", st, err)
	}
	// stderr written while no daemon was attached was kept for this one.
	if e := append(stderr, d.allErr()...); string(e) != "oops\n" {
		t.Errorf("stderr %q, want %q", e, "oops\n")
	}
	d.Release()
	if err := h.waitServe(long); err != nil {
		t.Errorf("Serve: %v", err)
	}
	assertGone(t, h.cfg)
}

func TestExitAckBeforeExitIsIgnored(t *testing.T) {
	h := serve(t, newConfig(t, echoScript))
	d := h.attach(0)
	// An exit ack while the agent runs must not end the shim.
	if err := d.send(frameExitAck, nil); err != nil {
		t.Fatal(err)
	}
	d.barrier("1")
	select {
	case <-h.done:
		t.Fatal("Serve returned on an exit ack while the agent runs")
	default:
	}
	d.Detach()
}

func TestStop(t *testing.T) {
	h := serve(t, newConfig(t, `sleep 30`))
	d := h.attach(0)
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	// Left alone, sleep 30 would exit 0: a death by signal is Stop's.
	st, err := d.Stop(ctx, time.Second)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st.Signal == "" || st.Code < 128 {
		t.Errorf("Stop: %+v, want a death by signal", st)
	}
	waitGroupGone(t, h.ready.AgentPID)
	if st2, err := d.Wait(); err != nil || st2 != st {
		t.Errorf("Wait after Stop: %+v %v, want %+v", st2, err, st)
	}
	d.Release()
	if err := h.waitServe(long); err != nil {
		t.Errorf("Serve: %v", err)
	}
	assertGone(t, h.cfg)
}

func TestStopKillsAfterGrace(t *testing.T) {
	h := serve(t, newConfig(t, `trap '' TERM; echo ready; sleep 30`))
	d := h.attach(0)
	d.waitOutContains("ready\n") // the trap is set
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	start := time.Now()
	st, err := d.Stop(ctx, 500*time.Millisecond)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st.Signal != "SIGKILL" {
		t.Errorf("Stop of an agent that ignores TERM: %+v, want SIGKILL", st)
	}
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Errorf("SIGKILL came after %v, before the grace", el)
	}
	waitGroupGone(t, h.ready.AgentPID)
	d.Release()
	if err := h.waitServe(long); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// notASignal is an os.Signal that is no syscall.Signal.
type notASignal struct{}

func (notASignal) String() string { return "not a signal" }
func (notASignal) Signal()        {}

func TestStopLetsTheAgentEndOnTerm(t *testing.T) {
	h := serve(t, newConfig(t, `trap 'exit 7' TERM; echo ready; while :; do sleep 0.1; done`))
	d := h.attach(0)
	d.waitOutContains("ready\n") // the trap is set
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	st, err := d.Stop(ctx, 10*time.Second)
	if err != nil || st != (berth.ExitStatus{Code: 7}) {
		t.Errorf("Stop of an agent that exits 7 on SIGTERM: %+v, %v", st, err)
	}
	waitGroupGone(t, h.ready.AgentPID)
	d.Release()
	if err := h.waitServe(long); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestSignal(t *testing.T) {
	h := serve(t, newConfig(t, `sleep 30`))
	d := h.attach(0)
	if err := d.Signal(notASignal{}); berth.ErrorCode(err) != berth.EInvalid {
		t.Errorf("Signal of a non-syscall signal: %v", err)
	}
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	st, err := d.wait()
	if err != nil || st.Signal != "SIGTERM" {
		t.Fatalf("Wait after SIGTERM: %+v, %v", st, err)
	}
	waitGroupGone(t, h.ready.AgentPID)
	d.Release()
	if err := h.waitServe(long); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// The job's input reaches the agent before anything a daemon sends, with
// no daemon attached yet, and the request in it is a call like one that
// came in a frame: the hello lists it until it is answered, and LastID
// counts it.
func TestTheJobsInputComesFirst(t *testing.T) {
	const req1 = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	cfg := newConfig(t, `read -r first; echo "first $first"; read -r second; echo "second $second"; cat`)
	cfg.Input = []byte(req1 + "\n")
	h := serve(t, cfg)
	d := h.attach(0)
	hl := d.Hello()
	if len(hl.Calls) != 1 || string(hl.Calls[0].ID) != "1" || hl.Calls[0].Method != "initialize" || hl.LastID != 1 {
		t.Errorf("hello: calls %s, last id %d; want initialize as call 1", showCalls(hl.Calls), hl.LastID)
	}
	d.write("after\n")
	want := "first " + req1 + "\nsecond after\n"
	if got := d.waitOut(len(want)); string(got) != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	h.closeAndEnd(d)
}

// The job's Then reaches the agent once it has answered Input's request
// with a result, with no daemon attached, and is a call the hello lists;
// an error answer (or an answer to another id) sends nothing.
func TestTheJobsThenFollowsTheAnswer(t *testing.T) {
	const req1 = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	const req2 = `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}`
	for _, tc := range []struct {
		name, answer string
		sent         bool
	}{
		{"result", `{"jsonrpc":"2.0","id":1,"result":{}}`, true},
		{"error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"no"}}`, false},
		{"another id", `{"jsonrpc":"2.0","id":7,"result":{}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The agent answers its first line, then says what it reads next.
			cfg := newConfig(t, `read -r first; echo '`+tc.answer+`'; read -r next; echo "next $next"; cat`)
			cfg.Input, cfg.Then = []byte(req1+"\n"), []byte(req2+"\n")
			h := serve(t, cfg)
			d := h.attach(0)
			if tc.sent {
				want := tc.answer + "\nnext " + req2 + "\n"
				if got := d.waitOut(len(want)); string(got) != want {
					t.Fatalf("stdout %q, want %q", got, want)
				}
				// Unanswered, the call is in flight for a daemon that
				// attaches now, as if a daemon had sent it.
				d.Release()
				d = h.attach(0)
				if hl := d.Hello(); len(hl.Calls) != 2 || string(hl.Calls[1].ID) != "2" || hl.Calls[1].Method != "session/new" || hl.LastID != 2 {
					t.Errorf("hello: calls %s, last id %d; want session/new as call 2", showCalls(hl.Calls), hl.LastID)
				}
			} else {
				d.waitOutContains(tc.answer + "\n")
				d.write("mine\n")
				want := tc.answer + "\nnext mine\n"
				if got := d.waitOut(len(want)); string(got) != want {
					t.Fatalf("stdout %q, want %q: Then was sent", got, want)
				}
			}
			h.closeAndEnd(d)
		})
	}
}

func TestCloseStdin(t *testing.T) {
	h := serve(t, newConfig(t, `cat; echo eof; exit 4`))
	d := h.attach(0)
	d.write("x\n")
	d.waitOutContains("x\n")
	if err := d.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	if out := d.allOut(); string(out) != "x\neof\n" {
		t.Errorf("stdout %q", out)
	}
	if st, err := d.wait(); err != nil || st.Code != 4 {
		t.Errorf("Wait: %+v, %v", st, err)
	}
	d.Release()
	if err := h.waitServe(long); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// The deadline the ACP connection sets on Stdin bounds stdin frames only:
// control frames sent after it passed still reach the shim.
func TestControlFramesIgnoreStdinDeadline(t *testing.T) {
	h := serve(t, newConfig(t, `trap 'exit 7' TERM; echo ready; while read -r line; do echo "got $line"; done`))
	d := h.attach(0)
	d.waitOutContains("ready\n") // the trap is set
	dl, ok := d.Stdin().(interface{ SetWriteDeadline(time.Time) error })
	if !ok {
		t.Fatal("Stdin has no SetWriteDeadline")
	}
	// A deadline to come lets the write through; one that has passed
	// (set so, rather than waited for) stops the next, and leaves the
	// connection with an expired deadline for the control frames after it.
	_ = dl.SetWriteDeadline(time.Now().Add(time.Minute))
	d.write("one\n")
	d.waitOutContains("got one\n")
	_ = dl.SetWriteDeadline(time.Now().Add(-time.Millisecond))
	if _, err := d.Stdin().Write([]byte("late\n")); err == nil {
		t.Error("a stdin write after its deadline succeeded")
	}
	if err := d.Ack(0); err != nil {
		t.Errorf("Ack after the stdin deadline: %v", err)
	}
	if err := d.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("Signal after the stdin deadline: %v", err)
	}
	_ = dl.SetWriteDeadline(time.Time{})
	d.barrier("1")
	_ = dl.SetWriteDeadline(time.Now().Add(-time.Second))
	// Stop goes through the shim: TERM, which the agent answers with 7,
	// not a SIGKILL of the group from the daemon's side.
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	if st, err := d.Stop(ctx, 10*time.Second); err != nil || st != (berth.ExitStatus{Code: 7}) {
		t.Errorf("Stop: %+v, %v; want the agent's own exit 7", st, err)
	}
	d.Release()
	if err := h.waitServe(long); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// A caller that does not read stdout or stderr cannot hold up Detach, and
// after Discard it still gets the exit.
func TestUnreadStreams(t *testing.T) {
	t.Run("detach", func(t *testing.T) {
		h := serve(t, newConfig(t, `head -c 2000000 /dev/zero | tr '\0' x; echo; echo oops >&2; exec sleep 30`))
		ctx, cancel := context.WithTimeout(context.Background(), long)
		defer cancel()
		p, err := Attach(ctx, h.cfg.Socket, 0)
		if err != nil {
			t.Fatal(err)
		}
		// All 2 MB spooled: far more than the connection's buffers hold
		// while nobody reads.
		eventually(t, "output to be spooled", func() bool { return fileSize(h.cfg.Spool) >= 2000000 })
		done := make(chan struct{})
		go func() { p.Detach(); close(done) }()
		if !waitClosed(done, long) {
			t.Fatal("Detach did not return while stdout was not read")
		}
		if _, err := p.Wait(); !errors.Is(err, ErrDetached) {
			t.Errorf("Wait: %v", err)
		}
		if _, err := p.Stdout().Read(make([]byte, 1)); err == nil {
			t.Error("stdout readable after Detach")
		}
	})
	t.Run("discard", func(t *testing.T) {
		h := serve(t, newConfig(t, `head -c 2000000 /dev/zero | tr '\0' x; echo oops >&2; exit 2`))
		ctx, cancel := context.WithTimeout(context.Background(), long)
		defer cancel()
		p, err := Attach(ctx, h.cfg.Socket, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.Discard()
		if !waitClosed(p.Done(), long) {
			t.Fatal("no exit after Discard")
		}
		if st, err := p.Wait(); err != nil || st.Code != 2 {
			t.Errorf("Wait: %+v, %v", st, err)
		}
		p.Release()
		if err := h.waitServe(long); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Run("stderr", func(t *testing.T) {
		// stdout is read, stderr is not: Wait still returns.
		h := serve(t, newConfig(t, `echo oops >&2; echo hi; exit 2`))
		ctx, cancel := context.WithTimeout(context.Background(), long)
		defer cancel()
		p, err := Attach(ctx, h.cfg.Socket, 0)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := io.ReadAll(p.Stdout()); err != nil || string(out) != "hi\n" {
			t.Errorf("stdout %q, %v", out, err)
		}
		if !waitClosed(p.Done(), long) {
			t.Fatal("no exit while stderr is not read")
		}
		if st, err := p.Wait(); err != nil || st.Code != 2 {
			t.Errorf("Wait: %+v, %v", st, err)
		}
		p.Release()
		if err := h.waitServe(long); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// After MarkDetached the Proc sends nothing more.
func TestMarkDetached(t *testing.T) {
	h := serve(t, newConfig(t, echoScript))
	d := h.attach(0)
	d.barrier("1")
	d.MarkDetached()
	if _, err := d.Stdin().Write([]byte("ping 2\n")); !errors.Is(err, ErrDetached) {
		t.Errorf("stdin write after MarkDetached: %v", err)
	}
	if err := d.Signal(syscall.SIGTERM); !errors.Is(err, ErrDetached) {
		t.Errorf("Signal after MarkDetached: %v", err)
	}
	if err := d.Stdin().Close(); err != nil {
		t.Errorf("stdin Close after MarkDetached: %v", err)
	}
	d.Detach()
	d2 := h.attach(int64(len("got ping 1\n")))
	d2.barrier("3")
	if out := d2.out.Bytes(); string(out) != "got ping 3\n" {
		t.Errorf("the agent got something after MarkDetached: %q", out)
	}
	d2.Detach()
}

// KillAgent kills a group only when its leader is the session's.
func TestKillAgent(t *testing.T) {
	start := func(env string) *exec.Cmd {
		cmd := exec.Command("/bin/sh", "-c", "sleep 30; exit 1")
		cmd.Env = []string{env}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
		// Until the exec, the child has the test's environment.
		eventually(t, "the exec", func() bool {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
			return string(b) == env+"\x00"
		})
		return cmd
	}
	other := start("BERTH_SESSION_ID=other")
	ours := start("BERTH_SESSION_ID=sess-1")
	// An entry that only ends like the session's is another variable.
	lookalike := start("NOT_BERTH_SESSION_ID=sess-1")
	KillAgent(other.Process.Pid, "sess-1")
	KillAgent(other.Process.Pid, "")
	KillAgent(ours.Process.Pid, "")
	KillAgent(lookalike.Process.Pid, "sess-1")
	KillAgent(1, "sess-1")
	// kill(2) has returned: a SIGKILL sent is pending or done by now.
	for _, c := range []*exec.Cmd{other, ours, lookalike} {
		if killSent(c.Process.Pid) {
			t.Errorf("process %d killed without a match: %s", c.Process.Pid, procStatus(c.Process.Pid))
		}
	}
	KillAgent(ours.Process.Pid, "sess-1")
	if err := ours.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the session's agent: %v, want killed", err)
	}
	if s := procState(other.Process.Pid); s == "" || s == "Z" {
		t.Errorf("another session's process: state %q", s)
	}
}

func TestNewerConnectionReplacesOlder(t *testing.T) {
	h := serve(t, newConfig(t, echoScript))
	d1 := h.attach(0)
	d1.barrier("1")
	d2 := h.attach(0)
	if _, err := d1.wait(); !errors.Is(err, ErrLost) {
		t.Errorf("Wait of the replaced connection: %v, want ErrLost", err)
	}
	d1.allOut()
	// The newer one replays and goes on live.
	d2.waitOutContains("got ping 1\n")
	d2.barrier("2")
	if out := d2.out.Bytes(); string(out) != "got ping 1\ngot ping 2\n" {
		t.Errorf("stdout of the newer connection %q", out)
	}
	d2.mustBeLive("the newer connection")
	d2.Detach()
}

func TestDetachLeavesAgent(t *testing.T) {
	h := serve(t, newConfig(t, echoScript))
	d := h.attach(0)
	d.barrier("1")
	d.Detach()
	if st, err := d.Wait(); !errors.Is(err, ErrDetached) {
		t.Errorf("Wait after Detach: %+v, %v; want ErrDetached", st, err)
	}
	d.allOut()
	// Closing stdin after a detach leaves it to the next daemon.
	if err := d.Stdin().Close(); err != nil {
		t.Errorf("stdin Close after Detach: %v", err)
	}
	pid := d.Pid()
	if s := procState(pid); s == "" || s == "Z" || s == "X" {
		t.Fatalf("agent %d after Detach: state %q", pid, s)
	}
	from := int64(len("got ping 1\n"))
	d2 := h.attach(from)
	if hl := d2.Hello(); hl.Exited != nil || hl.From != from || hl.End != from {
		t.Errorf("hello after Detach: %+v", hl)
	}
	d2.barrier("2")
	if out := d2.out.Bytes(); string(out) != "got ping 2\n" {
		t.Errorf("stdout after reattaching from %d: %q", from, out)
	}
	if s := procState(pid); s == "" || s == "Z" || s == "X" {
		t.Fatalf("agent %d: state %q", pid, s)
	}
	d2.Detach()
}

func TestLinger(t *testing.T) {
	cfg := newConfig(t, `exit 0`)
	cfg.Linger = 500 * time.Millisecond
	h := serve(t, cfg)
	if err := h.waitServe(long); err != nil {
		t.Errorf("Serve: %v", err)
	}
	assertGone(t, cfg)
}

func TestCancelStopsAgent(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		minTime      time.Duration
	}{
		// sh waits for its sleep: the whole group must go.
		{"term", `sleep 30; exit 1`, 0},
		// The shim's stop grace is 5s; then SIGKILL.
		{"ignores-term", `trap '' TERM; sleep 30`, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := serve(t, newConfig(t, tc.script))
			d := h.attach(0)
			pid := h.ready.AgentPID
			eventually(t, "the agent's sleep", func() bool { return len(liveInGroup(pid)) >= 2 })
			start := time.Now()
			h.cancel()
			if err := h.waitServe(long); err != nil {
				t.Errorf("Serve: %v", err)
			}
			el := time.Since(start)
			t.Logf("Serve returned %v after the cancel", el)
			if el < tc.minTime || el > 20*time.Second {
				t.Errorf("Serve returned %v after the cancel, want between %v and 20s", el, tc.minTime)
			}
			if pids := liveInGroup(pid); len(pids) != 0 {
				t.Errorf("agent group %d still has %v after Serve returned", pid, pids)
			}
			assertGone(t, h.cfg)
			// The daemon learns the end, one way or the other.
			if _, err := d.wait(); err != nil && !errors.Is(err, ErrLost) {
				t.Errorf("Wait: %v", err)
			}
		})
	}
}

func TestOpenFailures(t *testing.T) {
	checkLeaks(t)
	cfg := newConfig(t, `exit 0`)
	cfg.Sandbox.Workspace = filepath.Join(filepath.Dir(cfg.Socket), "missing")
	h := startServe(t, cfg)
	if err := h.waitServe(long); berth.ErrorCode(err) != berth.EInvalid {
		t.Errorf("Serve with a missing workspace: %v", err)
	}
	if h.ready.Stage != "sandbox" || h.ready.Code != berth.EInvalid || h.ready.Error == "" || h.ready.ShimPID != os.Getpid() {
		t.Errorf("ready: %+v", h.ready)
	}
	assertGone(t, cfg)

	cfg = newConfig(t, `exit 0`)
	cfg.Command.Path = "/nonexistent/agent"
	h = startServe(t, cfg)
	if err := h.waitServe(long); berth.ErrorCode(err) != berth.EUnavailable {
		t.Errorf("Serve with a missing agent: %v", err)
	}
	if h.ready.Stage != "start" || h.ready.Code != berth.EUnavailable || h.ready.AgentPID != 0 {
		t.Errorf("ready: %+v", h.ready)
	}
	assertGone(t, cfg)
}

func TestAttachNoShim(t *testing.T) {
	dir, err := os.MkdirTemp("", "shim")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_, err = Attach(context.Background(), filepath.Join(dir, "none.sock"), 0)
	if berth.ErrorCode(err) != berth.EUnavailable {
		t.Errorf("Attach to no socket: %v", err)
	}
}

func TestBadConnectionsLeaveTheDaemonAlone(t *testing.T) {
	h := serve(t, newConfig(t, echoScript))
	d := h.attach(0)
	d.barrier("1")

	// A connection that does not start with an attach frame is closed.
	nc, err := net.Dial("unix", h.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(appendFrame(nil, frameStdin, []byte("ping bad\n"))); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(long))
	if _, _, err := readFrame(bufio.NewReader(nc)); !errors.Is(err, io.EOF) {
		t.Errorf("a non-attach first frame: %v, want EOF", err)
	}
	// So is one whose attach payload is not JSON.
	nc2, err := net.Dial("unix", h.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	if _, err := nc2.Write(appendFrame(nil, frameAttach, []byte("{"))); err != nil {
		t.Fatal(err)
	}
	_ = nc2.SetReadDeadline(time.Now().Add(long))
	if _, _, err := readFrame(bufio.NewReader(nc2)); !errors.Is(err, io.EOF) {
		t.Errorf("a bad attach: %v, want EOF", err)
	}

	// The attached daemon is still the one, and nothing reached the agent.
	d.barrier("2")
	if out := d.out.Bytes(); string(out) != "got ping 1\ngot ping 2\n" {
		t.Errorf("stdout %q", out)
	}
	d.mustBeLive("the attached daemon's connection")
	d.Detach()
}

func TestFrameRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 300<<10)
	frames := []struct {
		typ     byte
		payload []byte
	}{
		{frameAttach, []byte(`{"from":12}`)},
		{frameExitAck, nil},
		{frameStdout, big},
		{frameHello, []byte{0, 1, 2, 255}},
	}
	var buf []byte
	for _, f := range frames {
		buf = appendFrame(buf, f.typ, f.payload)
	}
	if want := 5*len(frames) + len(big) + len(`{"from":12}`) + 4; len(buf) != want {
		t.Errorf("encoded %d bytes, want %d", len(buf), want)
	}
	if !bytes.Equal(buf[:5], []byte{frameAttach, 0, 0, 0, 11}) {
		t.Errorf("header % x: not type then big-endian length", buf[:5])
	}
	r := bufio.NewReaderSize(bytes.NewReader(buf), 16)
	for i, f := range frames {
		typ, payload, err := readFrame(r)
		if err != nil || typ != f.typ || !bytes.Equal(payload, f.payload) {
			t.Fatalf("frame %d: %q %d bytes %v", i, typ, len(payload), err)
		}
	}
	if _, _, err := readFrame(r); err != io.EOF {
		t.Errorf("after the last frame: %v, want EOF", err)
	}

	// The payload is the caller's own.
	buf = appendFrame(nil, frameStdin, []byte("abc"))
	r = bufio.NewReader(bytes.NewReader(buf))
	_, p, _ := readFrame(r)
	buf[5] = 'z'
	if string(p) != "abc" {
		t.Errorf("payload shares the reader's memory: %q", p)
	}

	// Over the cap: refused before the payload is read or allocated.
	hdr := []byte{frameStdout, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], maxFrame+1)
	if _, _, err := readFrame(bufio.NewReader(bytes.NewReader(hdr))); err == nil || !strings.Contains(err.Error(), "over the cap") {
		t.Errorf("over-cap frame: %v", err)
	}
	hdr = []byte{frameStdout, 0xff, 0xff, 0xff, 0xff}
	if _, _, err := readFrame(bufio.NewReader(bytes.NewReader(hdr))); err == nil || !strings.Contains(err.Error(), "over the cap") {
		t.Errorf("4 GiB frame: %v", err)
	}
	// Exactly the cap is fine (only the header is checked here).
	hdr = appendFrame(nil, frameStdout, []byte("x"))
	binary.BigEndian.PutUint32(hdr[1:], maxFrame)
	if _, _, err := readFrame(bufio.NewReader(bytes.NewReader(hdr))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a frame at the cap with its payload cut: %v, want ErrUnexpectedEOF", err)
	}

	// Truncated.
	if _, _, err := readFrame(bufio.NewReader(bytes.NewReader([]byte{frameStdout, 0, 0}))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated header: %v", err)
	}
	full := appendFrame(nil, frameStdout, []byte("hello"))
	if _, _, err := readFrame(bufio.NewReader(bytes.NewReader(full[:len(full)-1]))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated payload: %v", err)
	}
}

// TestSendEncodesFrames checks the hand-written headers of conn.send and
// Proc.send against readFrame.
func TestSendEncodesFrames(t *testing.T) {
	a, b, err := rawsock.Pair("test")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	payload := bytes.Repeat([]byte("ab"), 70000)
	errc := make(chan error, 1)
	go func() {
		c := &conn{nc: a}
		if err := c.send(frameStdout, payload); err != nil {
			errc <- err
			return
		}
		p := &Proc{nc: a}
		errc <- p.send(frameStdin, []byte("x"))
	}()
	r := bufio.NewReader(b)
	typ, got, err := readFrame(r)
	if err != nil || typ != frameStdout || !bytes.Equal(got, payload) {
		t.Fatalf("conn.send: %q %d bytes %v", typ, len(got), err)
	}
	typ, got, err = readFrame(r)
	if err != nil || typ != frameStdin || string(got) != "x" {
		t.Fatalf("Proc.send: %q %q %v", typ, got, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestKeepStderr(t *testing.T) {
	s := &server{}
	first := bytes.Repeat([]byte("a"), stderrKeep-10)
	s.keepStderrLocked(first)
	if !bytes.Equal(s.stderr, first) {
		t.Fatalf("kept %d bytes, want %d", len(s.stderr), len(first))
	}
	s.keepStderrLocked([]byte("0123456789abcdefghij"))
	if len(s.stderr) != stderrKeep || !bytes.HasSuffix(s.stderr, []byte("0123456789abcdefghij")) || !bytes.HasPrefix(s.stderr, []byte("aaaa")) {
		t.Errorf("kept %d bytes ending %q, want the last %d", len(s.stderr), s.stderr[len(s.stderr)-20:], stderrKeep)
	}
	s.keepStderrLocked(bytes.Repeat([]byte("z"), 2*stderrKeep))
	if len(s.stderr) != stderrKeep || bytes.ContainsAny(s.stderr, "a0") {
		t.Errorf("a write over the cap: kept %d bytes", len(s.stderr))
	}
}
