package procfs

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startWithEnv starts script under sh with kv added to its environment,
// in a group of its own when own is set, and waits for its exec.
func startWithEnv(t *testing.T, script, kv string, own bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), kv)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: own}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A reaped leader's group id may be another process's by now.
		if own && cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for !HasEnv(cmd.Process.Pid, kv) {
		if time.Now().After(deadline) {
			t.Fatalf("%q never ran", script)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cmd
}

// killed reports whether cmd ended by SIGKILL, waiting up to 10s.
func killed(t *testing.T, cmd *exec.Cmd) bool {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err != nil && strings.Contains(err.Error(), "killed")
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return false
	}
}

// A process is killed, with its group, only when its environment holds the
// entry; a group it shares with the caller is not killed; a pid whose
// process is gone is not signalled.
func TestKillIfEnv(t *testing.T) {
	kv := "PROCFS_KILL_MARK=" + t.Name()
	other := startWithEnv(t, "sleep 60", "PROCFS_KILL_MARK=another", true)
	if KillIfEnv(other.Process.Pid, kv, true) || KillIfEnv(other.Process.Pid, kv[:len(kv)-1], false) {
		t.Error("killed a process without the entry")
	}
	if KillIfEnv(1, kv, false) || KillIfEnv(0, kv, true) {
		t.Error("killed pid 1 or 0")
	}

	// The leader and the child it left in its group both go.
	ours := startWithEnv(t, "sleep 60 & wait", kv, true)
	if !KillIfEnv(ours.Process.Pid, kv, true) {
		t.Fatal("the process with the entry was not killed")
	}
	if !killed(t, ours) {
		t.Error("the leader did not die of SIGKILL")
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(-ours.Process.Pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the group's child outlived the kill: %v", Group(ours.Process.Pid))
		}
		time.Sleep(5 * time.Millisecond)
	}

	// A child in the caller's own group dies alone (this test still runs).
	shared := startWithEnv(t, "sleep 60", kv, false)
	if !KillIfEnv(shared.Process.Pid, kv, true) || !killed(t, shared) {
		t.Error("the child in the caller's group was not killed")
	}

	// Reaped, its pid names nothing: no signal is sent.
	if KillIfEnv(ours.Process.Pid, kv, true) || KillIfEnv(shared.Process.Pid, kv, false) {
		t.Error("signalled a reaped pid")
	}
	if st, err := ReadStat(other.Process.Pid); err != nil || !st.Live() {
		t.Errorf("the process without the entry: %+v, %v", st, err)
	}
}
