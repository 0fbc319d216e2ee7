// Package procfs reads what Linux's /proc says of processes: which there
// are, a process's stat line, program and environment. Processes come and
// go while they are read: a reader answers for one that is gone (or that
// this user may not read) with an error or false, never a guess.
package procfs

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"github.com/berth-sh/berth/internal/core"
)

// path is the file name of process pid's entry in /proc.
func path(pid int, name string) string {
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}

// PIDs lists the processes of /proc by pid, in no particular order.
func PIDs() []int {
	ents, _ := os.ReadDir("/proc")
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// Stat is what /proc/PID/stat says of a process.
type Stat struct {
	// Comm is the command name (at most 15 bytes of the program's name).
	Comm string
	// State is the state letter: R running, S sleeping, D in a wait, T
	// stopped, Z a zombie (ended, not yet reaped), X dead, ….
	State byte
	// PPID is the parent's pid, PGRP the process group's id.
	PPID, PGRP int
	// UTime and STime are the CPU time spent in user and in kernel mode,
	// in clock ticks (USER_HZ: 100 a second on Linux).
	UTime, STime int64
	// StartTime is when the process started, in clock ticks after boot:
	// with the pid, it names a process even once the pid is reused.
	StartTime int64
}

// Live reports whether the process has not ended: it is neither a zombie
// nor dead.
func (s Stat) Live() bool { return s.State != 'Z' && s.State != 'X' }

// ReadStat reads the stat line of process pid.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(path(pid, "stat"))
	if err != nil {
		return Stat{}, err
	}
	return parseStat(pid, b)
}

// parseStat parses a stat line: "pid (comm) state ppid pgrp …".
func parseStat(pid int, b []byte) (Stat, error) {
	// The command name may hold spaces and parentheses: it ends at the
	// last ')'.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, core.Errorf(core.EInternal, "/proc/%d/stat has no command name", pid)
	}
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, core.Errorf(core.EInternal, "/proc/%d/stat is short", pid)
	}
	num := func(i int) int64 {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return n
	}
	return Stat{
		Comm:      string(b[open+1 : end]),
		State:     f[0][0],
		PPID:      int(num(1)),
		PGRP:      int(num(2)),
		UTime:     num(11),
		STime:     num(12),
		StartTime: num(19),
	}, nil
}

// Exe is the program process pid runs.
func Exe(pid int) (string, error) { return os.Readlink(path(pid, "exe")) }

// Cmdline returns the arguments process pid was started with.
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(path(pid, "cmdline"))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), nil
}

// HasEnv reports whether process pid started with the entry kv
// ("KEY=VALUE", whole) in its environment.
func HasEnv(pid int, kv string) bool {
	env, err := os.ReadFile(path(pid, "environ"))
	if err != nil {
		return false
	}
	for len(env) > 0 {
		var entry []byte
		entry, env, _ = bytes.Cut(env, []byte{0})
		if string(entry) == kv {
			return true
		}
	}
	return false
}

// WithEnv lists the processes whose environment holds the entry kv
// ("KEY=VALUE", whole), in no particular order.
func WithEnv(kv string) []int {
	var out []int
	for _, pid := range PIDs() {
		if HasEnv(pid, kv) {
			out = append(out, pid)
		}
	}
	return out
}

// ByEnv maps each value of the environment variable key to the processes
// (this one left out) that started with it, in no particular order.
func ByEnv(key string) map[string][]int {
	out := map[string][]int{}
	self, prefix := os.Getpid(), []byte(key+"=")
	for _, pid := range PIDs() {
		env, err := os.ReadFile(path(pid, "environ"))
		if err != nil || pid == self {
			continue
		}
		for entry := range bytes.SplitSeq(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(entry, prefix); ok {
				out[string(v)] = append(out[string(v)], pid)
				break
			}
		}
	}
	return out
}

// Group lists the processes of process group pgid, zombies included
// (Stat.Live tells them apart), by pid.
func Group(pgid int) map[int]Stat {
	out := map[int]Stat{}
	for _, pid := range PIDs() {
		if st, err := ReadStat(pid); err == nil && st.PGRP == pgid {
			out[pid] = st
		}
	}
	return out
}

// ContextSwitches is how many times the threads of process pid have been
// switched off a CPU so far, voluntarily (to wait) or not: how often it
// woke. Threads that already ended are not counted; an error for a
// process that is gone.
func ContextSwitches(pid int) (int64, error) {
	tasks, err := os.ReadDir(path(pid, "task"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(path(pid, "task/"+t.Name()+"/status"))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n, nil
}
