package sandboxtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// markedProc is a host process carrying a test marker.
type markedProc struct {
	pid  int
	argv []string
}

// String is "pid: command line", cut short.
func (p markedProc) String() string {
	cmd := strings.Join(p.argv, " ")
	if len(cmd) > 160 {
		cmd = cmd[:160] + "…"
	}
	return fmt.Sprintf("%d: %s", p.pid, cmd)
}

// marked lists the host's processes, this one aside, whose command line
// or environment holds marker. Zombies have neither and are not listed.
func marked(marker string) []markedProc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	m := []byte(marker)
	var out []markedProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		environ, _ := os.ReadFile(filepath.Join(dir, "environ"))
		if bytes.Contains(cmdline, m) || bytes.Contains(environ, m) {
			argv := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
			out = append(out, markedProc{pid: pid, argv: argv})
		}
	}
	return out
}

// stillRunning reports whether pid is a process that has not begun to
// exit: an exiting one has dropped its memory, so its command line reads
// empty.
func stillRunning(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && len(b) > 0
}

// requireNoMarked fails unless every process carrying marker is gone
// within goneTimeout. Leftovers are listed, then killed so that they do
// not outlive the test.
func requireNoMarked(t *testing.T, marker, when string) {
	t.Helper()
	var left []markedProc
	if waitFor(goneTimeout, func() bool { left = marked(marker); return len(left) == 0 }) {
		return
	}
	t.Errorf("%d process(es) of the sandbox still run %s:\n%s", len(left), when, joinProcs(left))
	for _, p := range left {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// joinProcs formats processes one a line.
func joinProcs(ps []markedProc) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	return b.String()
}

// reaped reports whether pid is not an unreaped child of this process: a
// leader that Stop or Wait returned for must not be left a zombie.
func reaped(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return true
	}
	var state byte
	var ppid int
	if _, err := fmt.Sscanf(string(b[i+1:]), " %c %d", &state, &ppid); err != nil {
		return true
	}
	return !(state == 'Z' && ppid == os.Getpid())
}

// missingNamed returns those of names that no process carrying marker
// has as its last argument (the $0 of a "sh -c script name").
func missingNamed(marker string, names []string) []string {
	seen := map[string]bool{}
	for _, p := range marked(marker) {
		if len(p.argv) > 0 {
			seen[p.argv[len(p.argv)-1]] = true
		}
	}
	var out []string
	for _, n := range names {
		if !seen[n] {
			out = append(out, n)
		}
	}
	return out
}
