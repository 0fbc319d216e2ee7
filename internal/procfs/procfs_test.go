package procfs

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// A stat line is read field by field, a command name with spaces and
// parentheses in it included; a line cut short is an error, not zeros.
func TestParseStat(t *testing.T) {
	line := "4242 (a (b) c) Z 7 4240 4240 0 -1 4194560 100 0 0 0 31 17 0 0 20 0 1 0 98765 0 0\n"
	st, err := parseStat(4242, []byte(line))
	want := Stat{Comm: "a (b) c", State: 'Z', PPID: 7, PGRP: 4240, UTime: 31, STime: 17, StartTime: 98765}
	if err != nil || st != want {
		t.Fatalf("parseStat = %+v, %v; want %+v", st, err, want)
	}
	if st.Live() {
		t.Error("a zombie is live")
	}
	for _, bad := range []string{"4242 (x) S 1 2 3", "4242 x S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19", ""} {
		if _, err := parseStat(4242, []byte(bad)); err == nil {
			t.Errorf("parseStat(%q) took it", bad)
		}
	}
}

// A child is found by an entry of its environment (the whole entry, not a
// part of one), and its stat names its parent and group, running; once
// ended and reaped it is gone.
func TestChildByEnvAndStat(t *testing.T) {
	kv := "PROCFS_TEST_MARK=" + t.Name()
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), kv)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The environment is the child's once it ran exec.
	deadline := time.Now().Add(10 * time.Second)
	for !HasEnv(pid, kv) {
		if time.Now().After(deadline) {
			t.Fatalf("the child %d never showed %s", pid, kv)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := WithEnv(kv); !slices.Equal(got, []int{pid}) {
		t.Errorf("WithEnv = %v, want [%d]", got, pid)
	}
	// By the variable's value; a key that only starts the same is another.
	if got := ByEnv("PROCFS_TEST_MARK"); len(got) != 1 || !slices.Equal(got[t.Name()], []int{pid}) {
		t.Errorf("ByEnv = %v, want %s: [%d]", got, t.Name(), pid)
	}
	if got := ByEnv("PROCFS_TEST"); len(got) != 0 {
		t.Errorf("ByEnv of a prefix = %v", got)
	}
	if HasEnv(pid, kv[:len(kv)-1]) || HasEnv(pid, "X"+kv) {
		t.Error("a part of an entry matched")
	}
	if !slices.Contains(PIDs(), pid) || !slices.Contains(PIDs(), os.Getpid()) {
		t.Error("PIDs misses the child or this process")
	}
	st, err := ReadStat(pid)
	if err != nil || st.PPID != os.Getpid() || st.PGRP != pid || !st.Live() || st.Comm != "sleep" {
		t.Errorf("ReadStat = %+v, %v", st, err)
	}
	// The same process (its state and times move between two reads).
	if g := Group(pid); len(g) != 1 || g[pid].StartTime != st.StartTime || g[pid].PGRP != pid || g[pid].Comm != "sleep" {
		t.Errorf("Group(%d) = %+v, want the child alone", pid, g)
	}
	if exe, err := Exe(pid); err != nil || exe == "" {
		t.Errorf("Exe = %q, %v", exe, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := ReadStat(pid); err == nil {
		t.Error("a reaped child still has a stat")
	}
	if HasEnv(pid, kv) {
		t.Error("a reaped child still has an environment")
	}
}

// A process that waits again and again is switched off its CPU as often;
// one that is gone is an error.
func TestContextSwitches(t *testing.T) {
	// The shell waits for each of 20 sleeps it starts.
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 20 ]; do sleep 0.01; i=$((i+1)); done; exec sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := ContextSwitches(pid)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d context switches after 20 waits", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := ContextSwitches(pid); err == nil {
		t.Error("no error for a process that is gone")
	}
}

func TestCmdlineIsOsArgs(t *testing.T) {
	got, err := Cmdline(os.Getpid())
	if err != nil || !slices.Equal(got, os.Args) {
		t.Fatalf("Cmdline = %q, %v; os.Args %q", got, err, os.Args)
	}
	if _, err := Cmdline(-1); err == nil {
		t.Fatal("Cmdline of no process succeeded")
	}
}
