// Regression tests: reproductions of defects found while the package's
// tests were written, each failing before its fix.
package shim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Two daemons attaching at the same time may both stay attached: the
// second lock section of serveConn sets s.cur without closing the s.cur
// another serveConn set in between. And none may stay: an attach slow to
// reach its second section (its hello sent, its daemon gone) closed the
// newer one that had taken over meanwhile (1 run in 30 here).
func TestBugConcurrentAttachBothLive(t *testing.T) {
	h := serve(t, newConfig(t, echoScript))
	for round := 0; round < 40; round++ {
		const n = 4
		ds := make([]*daemon, n)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range n {
			wg.Go(func() {
				d := h.attach(0)
				mu.Lock()
				ds[i] = d
				mu.Unlock()
			})
		}
		wg.Wait()
		liveOf := func() int {
			live := 0
			for _, d := range ds {
				select {
				case <-d.Done():
				default:
					live++
				}
			}
			return live
		}
		// Each replaced connection sees it was replaced; with the defect
		// two stay attached however long one waits.
		deadline := time.Now().Add(long)
		for liveOf() > 1 && time.Now().Before(deadline) {
			time.Sleep(poll)
		}
		live := liveOf()
		if live > 1 {
			// Both get the agent's output: both are attached.
			var l []*daemon
			for _, d := range ds {
				select {
				case <-d.Done():
				default:
					l = append(l, d)
				}
			}
			l[0].barrier("both")
			l[1].waitOutContains("got ping both\n")
		}
		for _, d := range ds {
			d.Detach()
		}
		if live != 1 {
			t.Fatalf("round %d: %d connections still attached after %d concurrent attaches, want 1", round, live, n)
		}
	}
}

// Frames from the daemon are read one at a time, and a stdin write blocks
// the loop: an agent that does not read its stdin cannot be signalled (or
// stopped: Proc.Stop then falls back to SIGKILLing the agent and the shim).
func TestBugStdinBlocksSignal(t *testing.T) {
	h := serve(t, newConfig(t, `exec sleep 30`))
	d := h.attach(0)
	d.write(strings.Repeat("x", 255) + "\n" + strings.Repeat("y", 200<<10) + "\n")
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !waitClosed(d.Done(), 5*time.Second) {
		t.Errorf("SIGTERM sent after a stdin write the agent does not read never reached it")
	}
	h.cancel()
	_ = h.waitServe(long)
}

// An attach from past the end moves the spool's start past its end: output
// the agent writes afterwards, before that offset, is never replayed.
func TestBugAttachPastEndLosesOutput(t *testing.T) {
	h := serve(t, newConfig(t, echoScript))
	d := h.attach(10000)
	if hl := d.Hello(); hl.From != 0 {
		t.Fatalf("From %d", hl.From)
	}
	d.barrier("1")
	d.Detach()
	d = h.attach(0)
	if hl := d.Hello(); hl.From != 0 {
		t.Errorf("attach from 0: From %d, want 0 (the output after it was never acked)", hl.From)
	}
	d.Detach()
}

// Hello carries the unanswered requests' lines; json.Marshal escapes <, >
// and & in them six-fold, so a request line well under the 64 MiB a line
// may be makes a Hello over maxFrame, and no daemon can attach any more.
func TestBugHelloOverCap(t *testing.T) {
	script := `head -c 12000000 /dev/zero | tr '\0' '<' > big; printf '{"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":{"content":"'; cat big; echo '"}}'; exec sleep 30`
	h := serve(t, newConfig(t, script))
	d := h.attach(0)
	d.waitOutContains(`"}}` + "\n")
	d.Detach()
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	p, err := Attach(ctx, h.cfg.Socket, 0)
	if err != nil {
		t.Fatalf("attach with a 12 MB request pending: %v", err)
	}
	go func() { _, _ = bytes.NewBuffer(nil).ReadFrom(p.Stdout()) }()
	go func() { _, _ = bytes.NewBuffer(nil).ReadFrom(p.Stderr()) }()
	p.Detach()
}

// open creates the spool first; when writing the pid file or listening
// then fails, it closes the spool but leaves the file behind.
func TestBugOpenFailureLeavesSpool(t *testing.T) {
	checkLeaks(t)
	cfg := newConfig(t, `exit 0`)
	cfg.PIDFile = filepath.Join(filepath.Dir(cfg.Socket), "missing", "s.pid")
	h := startServe(t, cfg)
	if err := h.waitServe(long); err == nil || h.ready.Stage != "shim" {
		t.Fatalf("Serve: %v, ready %+v", err, h.ready)
	}
	assertGone(t, cfg)

	cfg = newConfig(t, `exit 0`)
	cfg.Socket = filepath.Join(filepath.Dir(cfg.Socket), "missing", "s.sock")
	h = startServe(t, cfg)
	if err := h.waitServe(long); err == nil || h.ready.Stage != "shim" {
		t.Fatalf("Serve: %v, ready %+v", err, h.ready)
	}
	assertGone(t, cfg)
}

// Since the stdout pump sends to a caught-up daemon itself (8c9d0a1), a
// daemon that is connected but does not read (busy, stopped, or a Proc
// whose Stdout nobody reads) blocks the pump: the agent blocks on its
// stdout and the spool stops growing, where the sender goroutine used to
// absorb any lag in the spool.
func TestBugSlowDaemonStallsAgent(t *testing.T) {
	h := serve(t, newConfig(t, `head -c 20000000 /dev/zero | tr '\0' x; echo; exit 0`))
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	p, err := Attach(ctx, h.cfg.Socket, h.cfg.Base)
	if err != nil {
		t.Fatal(err)
	}
	pid := h.ready.AgentPID
	// With the defect the agent blocks for good; the deadline is generous.
	deadline := time.Now().Add(long)
	for procState(pid) != "" && time.Now().Before(deadline) {
		time.Sleep(poll)
	}
	if procState(pid) != "" {
		t.Errorf("the agent is still blocked writing its 20 MB after %v while the daemon does not read", long)
	}
	_ = p.Stdout().Close()
	_ = p.Stderr().Close()
	p.Detach()
}

// The agent starts before the spool and the socket are made: when making
// them fails, the agent it started is ended and reaped, not left running.
func TestABundleFailureEndsTheStartedAgent(t *testing.T) {
	checkLeaks(t)
	cfg := newConfig(t, "")
	// sleep adds its arguments up: the second marks this agent.
	marker := fmt.Sprintf("0.000%d", time.Now().UnixNano()%1_000_000_000)
	cfg.Command = Command{Path: "/bin/sleep", Args: []string{"60", marker}}
	cfg.Socket = filepath.Join(filepath.Dir(cfg.Socket), "missing", "s.sock")
	h := startServe(t, cfg)
	if err := h.waitServe(long); err == nil || h.ready.Stage != "shim" {
		t.Fatalf("Serve: %v, ready %+v", err, h.ready)
	}
	assertGone(t, cfg)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); bytes.Contains(b, []byte(marker)) {
			t.Fatalf("the agent (pid %s) is still there after the shim failed", e.Name())
		}
	}
}
