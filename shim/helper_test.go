package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/host"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Generous bounds: the tests run with -race on small, loaded machines.
const (
	// long bounds anything that should happen "soon".
	long = 30 * time.Second
	// poll is the polling interval.
	poll = 10 * time.Millisecond
)

// readyWriter receives Serve's ready line.
type readyWriter struct{ ch chan []byte }

func (w readyWriter) Write(b []byte) (int, error) {
	select {
	case w.ch <- bytes.Clone(b):
	default:
	}
	return len(b), nil
}

// harness is one in-process shim, served by a goroutine the test owns.
type harness struct {
	t      *testing.T
	cfg    Config
	ready  Ready
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Serve's result, once done is closed
	drains sync.WaitGroup
}

// newConfig makes a shim job running script with /bin/sh, in a fresh
// short temporary directory (Unix socket paths are limited to 107 bytes).
func newConfig(t *testing.T, script string) Config {
	t.Helper()
	dir := testenv.ShortTempDir(t, "shim")
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return Config{
		SessionID: "sess-1",
		Bundle:    Bundle{Socket: filepath.Join(dir, "s.sock"), Spool: filepath.Join(dir, "s.spool"), PIDFile: filepath.Join(dir, "s.pid")},
		Sandbox:   berth.SandboxConfig{SessionID: "sess-1", Workspace: ws, Home: home},
		Command:   Command{Path: "/bin/sh", Args: []string{"-c", script}},
		Provider:  "host",
	}
}

// checkLeaks makes the test fail if it leaves a goroutine behind. It is
// registered first so that its cleanup runs last.
func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		goleak.VerifyNone(t, ignore)
	})
}

// serve runs Serve for cfg and waits for its ready line. The cleanup
// cancels Serve, waits for it to return and for every reader the test
// started.
func serve(t *testing.T, cfg Config) *harness {
	t.Helper()
	checkLeaks(t)
	h := startServe(t, cfg)
	if h.ready.Error != "" || h.ready.Stage != "" {
		t.Fatalf("ready: %+v", h.ready)
	}
	if h.ready.AgentPID <= 0 || h.ready.ShimPID != os.Getpid() {
		t.Fatalf("ready pids: %+v (test pid %d)", h.ready, os.Getpid())
	}
	if b, err := os.ReadFile(cfg.PIDFile); err != nil || string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("pid file: %q, %v", b, err)
	}
	return h
}

// startServe runs Serve and reads its ready line, whatever it says.
func startServe(t *testing.T, cfg Config) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rw := readyWriter{ch: make(chan []byte, 1)}
	h := &harness{t: t, cfg: cfg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		h.err = Serve(ctx, host.New(), cfg, rw, nil)
	}()
	t.Cleanup(func() {
		cancel()
		if !waitClosed(h.done, long) {
			t.Errorf("Serve did not return within %v of its ctx ending", long)
			return
		}
		drained := make(chan struct{})
		go func() { h.drains.Wait(); close(drained) }()
		if !waitClosed(drained, long) {
			t.Errorf("stdout/stderr readers still running after Serve returned")
		}
	})
	select {
	case line := <-rw.ch:
		if err := json.Unmarshal(line, &h.ready); err != nil {
			t.Fatalf("ready line %q: %v", line, err)
		}
		if !bytes.HasSuffix(line, []byte("\n")) {
			t.Errorf("ready line %q is not a line", line)
		}
	case <-h.done:
		select {
		case line := <-rw.ch:
			if err := json.Unmarshal(line, &h.ready); err != nil {
				t.Fatalf("ready line %q: %v", line, err)
			}
		default:
			t.Fatalf("Serve returned %v without a ready line", h.err)
		}
	case <-time.After(long):
		t.Fatal("no ready line")
	}
	return h
}

// waitServe waits for Serve to return by itself and returns its error.
func (h *harness) waitServe(within time.Duration) error {
	h.t.Helper()
	if !waitClosed(h.done, within) {
		h.t.Fatalf("Serve still running after %v", within)
	}
	return h.err
}

// waitClosed waits for ch to close, up to d.
func waitClosed[T any](ch <-chan T, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// eventually polls cond until it holds, failing the test after long.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, long, what, cond)
}

// daemon is one attached Proc whose stdout and stderr are drained.
type daemon struct {
	*Proc
	t                *testing.T
	out, errOut      testenv.Buffer
	outDone, errDone chan struct{}
}

// attach attaches from offset from and drains the Proc's stdout and
// stderr in goroutines the harness waits for.
// closeAndEnd closes the agent's stdin, waits for it to exit, releases
// the shim and waits for Serve to return.
func (h *harness) closeAndEnd(d *daemon) {
	h.t.Helper()
	if err := d.Stdin().Close(); err != nil {
		h.t.Fatal(err)
	}
	if _, err := d.wait(); err != nil {
		h.t.Fatal(err)
	}
	d.Release()
	if err := h.waitServe(long); err != nil {
		h.t.Errorf("Serve: %v", err)
	}
}

func (h *harness) attach(from int64) *daemon {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	p, err := Attach(ctx, h.cfg.Socket, from)
	if err != nil {
		h.t.Fatalf("attach from %d: %v", from, err)
	}
	d := &daemon{Proc: p, t: h.t, outDone: make(chan struct{}), errDone: make(chan struct{})}
	h.drains.Add(2)
	go func() {
		defer h.drains.Done()
		defer close(d.outDone)
		_, _ = io.Copy(&d.out, p.Stdout())
	}()
	go func() {
		defer h.drains.Done()
		defer close(d.errDone)
		_, _ = io.Copy(&d.errOut, p.Stderr())
	}()
	return d
}

// waitOut waits until the daemon has at least n bytes of stdout and
// returns them all.
func (d *daemon) waitOut(n int) []byte {
	d.t.Helper()
	eventually(d.t, fmt.Sprintf("%d bytes of stdout (have %d)", n, len(d.out.Bytes())), func() bool {
		return len(d.out.Bytes()) >= n
	})
	return d.out.Bytes()
}

// waitOutContains waits until the daemon's stdout contains s.
func (d *daemon) waitOutContains(s string) []byte {
	d.t.Helper()
	eventually(d.t, fmt.Sprintf("stdout to contain %q", s), func() bool {
		return bytes.Contains(d.out.Bytes(), []byte(s))
	})
	return d.out.Bytes()
}

// allOut waits for stdout to end and returns it.
func (d *daemon) allOut() []byte {
	d.t.Helper()
	if !waitClosed(d.outDone, long) {
		d.t.Fatalf("stdout did not end; have %q", d.out.Bytes())
	}
	return d.out.Bytes()
}

// allErr waits for stderr to end and returns it.
func (d *daemon) allErr() []byte {
	d.t.Helper()
	if !waitClosed(d.errDone, long) {
		d.t.Fatalf("stderr did not end; have %q", d.errOut.Bytes())
	}
	return d.errOut.Bytes()
}

// wait waits for the Proc to be done and returns what Wait says.
func (d *daemon) wait() (berth.ExitStatus, error) {
	d.t.Helper()
	if !waitClosed(d.Done(), long) {
		d.t.Fatalf("Proc not done within %v", long)
	}
	return d.Wait()
}

// mustBeLive fails the test when the Proc is done already: what, its
// connection, was not to be lost.
func (d *daemon) mustBeLive(what string) {
	d.t.Helper()
	select {
	case <-d.Done():
		d.t.Errorf("%s is lost", what)
	default:
	}
}

// write writes to the agent's stdin through the shim.
func (d *daemon) write(s string) {
	d.t.Helper()
	if n, err := d.Stdin().Write([]byte(s)); err != nil || n != len(s) {
		d.t.Fatalf("stdin write %q: %d, %v", s, n, err)
	}
}

// barrier makes sure the shim has handled every frame this daemon sent
// before: it writes a line the agent echoes as "got LINE" and waits for
// the echo (the shim reads one connection's frames in order).
func (d *daemon) barrier(tag string) {
	d.t.Helper()
	d.write("ping " + tag + "\n")
	d.waitOutContains("got ping " + tag + "\n")
}

// killSent reports whether pid is gone, a zombie, or has a SIGKILL
// pending: one of these holds as soon as a kill(2) of it has returned.
func killSent(pid int) bool {
	status := procStatus(pid)
	if status == "" {
		return true
	}
	for line := range strings.Lines(status) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
				return true
			}
		case "SigPnd", "ShdPnd":
			if mask, err := strconv.ParseUint(v, 16, 64); err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
				return true
			}
		}
	}
	return false
}

// procStatus is /proc/<pid>/status, or "" when pid is gone.
func procStatus(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	return string(b)
}

// procState returns the state letter of pid from /proc ("" when gone).
func procState(pid int) string {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return ""
	}
	return string(st.State)
}

// liveInGroup lists the processes of group pgid that are not zombies.
func liveInGroup(pgid int) []int {
	var pids []int
	for pid, st := range procfs.Group(pgid) {
		if st.Live() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitGroupGone waits until group pgid has no live process.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	eventually(t, fmt.Sprintf("process group %d to end", pgid), func() bool { return len(liveInGroup(pgid)) == 0 })
}

// assertGone checks that the shim removed its socket, spool and pid file.
func assertGone(t *testing.T, cfg Config) {
	t.Helper()
	for _, p := range []string{cfg.Socket, cfg.Spool, cfg.PIDFile} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Serve returned (stat: %v)", filepath.Base(p), err)
		}
	}
}
