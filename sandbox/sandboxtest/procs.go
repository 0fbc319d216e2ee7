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

// Pids lists this host's processes, this one aside, that keep keeps.
func Pids(keep func(pid int) bool) []int {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self && keep(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ProcFile is /proc/<pid>/<name>, nil when it cannot be read (the process
// is gone).
func ProcFile(pid int, name string) []byte {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), name))
	return b
}

// Stat is the fields of /proc/<pid>/stat after the command (state, ppid,
// pgrp, …: the command, in parentheses, may hold spaces), nil once the
// process is gone.
func Stat(pid int) []string {
	b := ProcFile(pid, "stat")
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// marked lists the host's processes, this one aside, whose command line
// or environment holds marker. Zombies have neither and are not listed.
func marked(marker string) []markedProc {
	m := []byte(marker)
	var out []markedProc
	Pids(func(pid int) bool {
		cmdline := ProcFile(pid, "cmdline")
		if bytes.Contains(cmdline, m) || bytes.Contains(ProcFile(pid, "environ"), m) {
			argv := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
			out = append(out, markedProc{pid: pid, argv: argv})
		}
		return false
	})
	return out
}

// stillRunning reports whether pid is a process that has not begun to
// exit: an exiting one has dropped its memory, so its command line reads
// empty.
func stillRunning(pid int) bool { return len(ProcFile(pid, "cmdline")) > 0 }

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
	f := Stat(pid)
	return len(f) < 2 || f[0] != "Z" || f[1] != strconv.Itoa(os.Getpid())
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
