package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/berth-sh/berth"
)

// terminal is a berth command run on a pseudo-terminal, as a person at a
// shell runs it: what it printed so far, and keys to type.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	pty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

// startTerminal runs bin with args on a new pseudo-terminal.
func startTerminal(t *testing.T, env []string, args ...string) *terminal {
	t.Helper()
	tm := &terminal{t: t, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	tm.cmd.Env = env
	f, err := pty.StartWithSize(tm.cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	tm.pty = f
	go func() {
		defer close(tm.done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			tm.mu.Lock()
			tm.out.Write(buf[:n])
			tm.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = tm.cmd.Process.Kill()
		_ = tm.cmd.Wait()
		_ = f.Close()
		<-tm.done
	})
	return tm
}

// printed is everything the terminal shows so far.
func (tm *terminal) printed() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()
}

// waitFor waits until the terminal shows want (after the first `from` of
// its text), and returns what it shows.
func (tm *terminal) waitFor(want string) string {
	tm.t.Helper()
	return tm.waitForNth(want, 1)
}

// waitForNth waits until the terminal has shown want n times (a turn's
// end marker is shown once per turn).
func (tm *terminal) waitForNth(want string, n int) string {
	tm.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s := tm.printed(); strings.Count(s, want) >= n {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the terminal never showed %q:\n%s", want, tm.printed())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// typeLine types a line and Enter.
func (tm *terminal) typeLine(s string) {
	tm.t.Helper()
	if _, err := io.WriteString(tm.pty, s+"\r"); err != nil {
		tm.t.Fatal(err)
	}
}

// exitCode waits for the command to end.
func (tm *terminal) exitCode() int {
	tm.t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- tm.cmd.Wait() }()
	select {
	case <-ch:
		return tm.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		tm.t.Fatalf("the command did not end:\n%s", tm.printed())
	}
	return -1
}

// berth attach, at a terminal: it shows the session's recent past, then
// what happens live; lines typed become prompts (queued while busy), a
// ! line interrupts, /steer steers, a permission question is answered by
// its number, and Ctrl-D detaches with the session still running.
func TestAttachAtATerminal(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.create(t, map[string]any{"permission_mode": "ask"})
	var r berth.TurnResult
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]string{"text": "echo from before"}, &r); st != 200 {
		t.Fatalf("prompt = %d", st)
	}
	env := s.cliEnv("NO_COLOR=1", "TERM=dumb")
	tm := startTerminal(t, env, "attach", sess.ID)
	tm.waitFor("attached to " + sess.ID)
	tm.waitFor("from before") // the recent past

	tm.typeLine("echo typed here")
	tm.waitFor("» echo typed here")
	// The second end: the first was the recent past's.
	tm.waitForNth("[end_turn]", 2)

	// Busy: the next line queues; ! interrupts the turn and the queue.
	tm.typeLine("sleep 60000")
	tm.waitFor("» sleep 60000")
	tm.typeLine("echo waiting in line")
	tm.waitFor("queued as ")
	tm.typeLine("!echo right now")
	tm.waitFor("right now")
	tm.waitFor("[cancelled]")
	if out := tm.printed(); strings.Contains(out[strings.Index(out, "queued as "):], "» echo waiting in line") {
		t.Errorf("the interrupted queue's entry ran:\n%s", out)
	}

	// A permission question is put here and answered by its number.
	tm.typeLine("ask delete everything")
	tm.waitFor("? ")
	tm.typeLine("1")
	tm.waitFor("(by user)")
	perms := 0
	var list struct {
		Permissions []berth.Permission `json:"permissions"`
	}
	s.api("GET", "/v1/sessions/"+sess.ID+"/permissions", nil, &list)
	for _, p := range list.Permissions {
		if p.State != berth.PermissionPending && p.DecidedBy == "user" {
			perms++
		}
	}
	if perms != 1 {
		t.Errorf("permissions decided by the user: %d, want 1: %+v", perms, list.Permissions)
	}

	// Ctrl-D detaches; the session runs on.
	if _, err := tm.pty.Write([]byte{4}); err != nil {
		t.Fatal(err)
	}
	tm.waitFor("detached (the session keeps running)")
	if code := tm.exitCode(); code != 0 {
		t.Errorf("attach exited %d", code)
	}
	var got berth.Session
	if st, _ := s.api("GET", "/v1/sessions/"+sess.ID, nil, &got); st != 200 || got.State != berth.StateActive {
		t.Errorf("after detach: %d %s", st, got.State)
	}

	// Ctrl-C detaches too: it never cancels the agent's work.
	tm = startTerminal(t, env, "attach", sess.ID)
	tm.waitFor("attached to " + sess.ID)
	tm.typeLine("sleep 60001")
	tm.waitFor("» sleep 60001")
	if _, err := tm.pty.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	tm.waitFor("detached (the session keeps running)")
	if code := tm.exitCode(); code != 0 {
		t.Errorf("attach exited %d after Ctrl-C", code)
	}
	if st, _ := s.api("GET", "/v1/sessions/"+sess.ID, nil, &got); st != 200 || got.Badge != berth.BadgeRunning {
		t.Errorf("after Ctrl-C: %d %s, want the turn still running", st, got.Badge)
	}
}

// The line being typed in berth attach stays on a line of its own below
// what the session shows, even while a turn's progress dots stream onto
// the line above it; Enter then sends it whole.
func TestAttachKeepsTheTypedLineBelowTheOutput(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.create(t, nil)
	tm := startTerminal(t, s.cliEnv("NO_COLOR=1", "TERM=dumb"), "attach", sess.ID)
	tm.waitFor("attached to " + sess.ID)
	tm.typeLine("sleep 5000")
	tm.waitFor("» sleep 5000")
	tm.waitFor("..")
	if _, err := io.WriteString(tm.pty, "echo typed"); err != nil {
		t.Fatal(err)
	}
	tm.waitFor("echo typed")
	// More dots come while the line is half typed.
	dots := strings.Count(tm.printed(), ".")
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(tm.printed(), ".") < dots+3 {
		if time.Now().After(deadline) {
			t.Fatalf("no more progress dots:\n%q", tm.printed())
		}
		time.Sleep(20 * time.Millisecond)
	}
	lines := screen(tm.printed())
	last := len(lines) - 1
	for last > 0 && strings.TrimSpace(lines[last]) == "" {
		last--
	}
	if lines[last] != attachPrompt+"echo typed" || strings.Trim(lines[last-1], ".") != "" {
		t.Fatalf("the screen's last lines are %q and %q, want the dots above %q:\n%s",
			lines[last-1], lines[last], attachPrompt+"echo typed", strings.Join(lines, "\n"))
	}
	tm.typeLine("")
	tm.waitFor("queued as ")
	tm.waitFor("» (queue) echo typed")
	// The sent line stays on the screen as it was typed.
	if lines := screen(tm.printed()); !slices.Contains(lines, attachPrompt+"echo typed") {
		t.Fatalf("the sent line is gone from the screen:\n%s", strings.Join(lines, "\n"))
	}
}

// screen plays what a program wrote to a terminal onto its lines, as the
// terminal shows them: enough of a VT100 for berth attach (carriage
// return, line feed, the cursor moved up, down, right or left, the line
// erased to its end; colors ignored).
func screen(out string) []string {
	lines := [][]rune{nil}
	row, col := 0, 0
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\r':
			col = 0
		case r == '\n':
			row++
			for len(lines) <= row {
				lines = append(lines, nil)
			}
		case r == 0x1b && i+1 < len(rs) && rs[i+1] == '[':
			j, n := i+2, 0
			for j < len(rs) && rs[j] >= '0' && rs[j] <= '9' {
				n = n*10 + int(rs[j]-'0')
				j++
			}
			for j < len(rs) && (rs[j] == ';' || rs[j] >= '0' && rs[j] <= '9') {
				j++
			}
			if j >= len(rs) {
				i = j
				break
			}
			n = max(n, 1)
			switch rs[j] {
			case 'A':
				row = max(0, row-n)
			case 'B':
				row += n
				for len(lines) <= row {
					lines = append(lines, nil)
				}
			case 'C':
				col += n
			case 'D':
				col = max(0, col-n)
			case 'K':
				if col < len(lines[row]) {
					lines[row] = lines[row][:col]
				}
			}
			i = j
		default:
			for len(lines[row]) < col {
				lines[row] = append(lines[row], ' ')
			}
			if col < len(lines[row]) {
				lines[row][col] = r
			} else {
				lines[row] = append(lines[row], r)
			}
			col++
		}
	}
	out2 := make([]string, len(lines))
	for i, l := range lines {
		out2[i] = string(l)
	}
	return out2
}
