package sandboxtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// Time limits of the suite. They are generous: they only turn a hang into
// a failure.
const (
	// runTimeout bounds one script run to completion.
	runTimeout = 60 * time.Second
	// lineTimeout bounds waiting for a line a process prints.
	lineTimeout = 30 * time.Second
	// goneTimeout bounds waiting for processes to vanish.
	goneTimeout = 15 * time.Second
	// stopTimeout bounds Stop and Close in cleanups.
	stopTimeout = 30 * time.Second
)

// box is one sandbox opened for a test, with what the test needs to know
// about it.
type box struct {
	sb  berth.Sandbox
	cfg berth.SandboxConfig
	// marker is unique to the box and in every process's environment.
	marker string
	// bb is busybox's path inside the sandbox.
	bb string
}

// newMarker returns a fresh unique string.
func newMarker() string {
	return "sbt" + rand.Text()
}

// newBox opens a sandbox on a fresh workspace and home, with the marker
// in its environment and, for isolating providers, busybox bound in. edit,
// when not nil, adjusts the config first. When the test ends the sandbox
// is closed and no process carrying its marker may remain.
func (s *suite) newBox(t *testing.T, edit func(*berth.SandboxConfig)) *box {
	t.Helper()
	b := &box{marker: newMarker(), bb: HostBusybox}
	b.cfg = berth.SandboxConfig{
		SessionID: "ses_" + b.marker,
		Workspace: t.TempDir(),
		Home:      t.TempDir(),
		Env:       map[string]string{MarkerVar: b.marker},
	}
	if s.opts.Isolated {
		b.cfg.Binds = append(b.cfg.Binds, berth.Bind{Source: HostBusybox, Target: BusyboxPath})
		b.bb = BusyboxPath
	}
	if edit != nil {
		edit(&b.cfg)
	}
	sb, err := s.open(t).Open(context.Background(), b.cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	b.sb = sb
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := sb.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		requireNoMarked(t, b.marker, "after the sandbox was closed")
	})
	return b
}

// start starts spec and stops the process when the test ends.
func (b *box) start(t *testing.T, spec berth.ProcSpec) berth.Process {
	t.Helper()
	p, err := b.sb.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start %s: %v", spec.Path, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if _, err := p.Stop(ctx, 0); err != nil {
			t.Errorf("Stop in cleanup: %v", err)
		}
		for _, r := range []io.ReadCloser{p.Stdout(), p.Stderr()} {
			if r != nil {
				_ = r.Close()
			}
		}
	})
	return p
}

// shell is a spec that runs script with busybox sh. The script starts
// with BB set to busybox's path inside the sandbox.
func (b *box) shell(script string) berth.ProcSpec {
	return berth.ProcSpec{Path: b.bb, Args: []string{"sh", "-c", "BB='" + b.bb + "'\n" + script}}
}

// result is what a finished script printed and how it ended.
type result struct {
	stdout, stderr string
	status         berth.ExitStatus
}

// run runs script to completion with an empty stdin and returns its
// output. edit, when not nil, adjusts the spec first.
func (b *box) run(t *testing.T, script string, edit func(*berth.ProcSpec)) result {
	t.Helper()
	var out, errOut bytes.Buffer
	spec := b.shell(script)
	spec.Stdout, spec.Stderr = &out, &errOut
	if edit != nil {
		edit(&spec)
	}
	p := b.start(t, spec)
	if w := p.Stdin(); w != nil {
		_ = w.Close()
	}
	st := waitExit(t, p, runTimeout)
	return result{stdout: out.String(), stderr: errOut.String(), status: st}
}

// waitExit waits up to d for p to exit; past d it stops p and fails.
func waitExit(t *testing.T, p berth.Process, d time.Duration) berth.ExitStatus {
	t.Helper()
	type waited struct {
		st  berth.ExitStatus
		err error
	}
	ch := make(chan waited, 1)
	go func() {
		st, err := p.Wait()
		ch <- waited{st, err}
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case w := <-ch:
		if w.err != nil {
			t.Errorf("Wait: %v", w.err)
		}
		return w.st
	case <-timer.C:
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	_, _ = p.Stop(ctx, 0)
	select {
	case <-ch:
		t.Fatalf("the process did not exit within %v", d)
	case <-time.After(stopTimeout):
		t.Fatalf("the process did not exit within %v, and Wait did not return after Stop", d)
	}
	return berth.ExitStatus{}
}

// readLine reads one line from r within lineTimeout. On timeout it closes
// closer (the pipe under r), which ends the read, and fails.
func readLine(t *testing.T, r *bufio.Reader, closer io.Closer) string {
	t.Helper()
	type read struct {
		line string
		err  error
	}
	ch := make(chan read, 1)
	go func() {
		line, err := r.ReadString('\n')
		ch <- read{line, err}
	}()
	timer := time.NewTimer(lineTimeout)
	defer timer.Stop()
	select {
	case rd := <-ch:
		if rd.err != nil {
			t.Fatalf("reading a line: %v (got %q)", rd.err, rd.line)
		}
		return strings.TrimSpace(rd.line)
	case <-timer.C:
		_ = closer.Close()
		<-ch
		t.Fatalf("no line within %v", lineTimeout)
		return ""
	}
}

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
