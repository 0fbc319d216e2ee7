package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// Through the daemon, a root daemon's docker session is [sandbox]
// host_uid on the host, no login account's: the agent's processes (made
// by `berth shim`'s provider) and their files, the managed workspace and
// the berth MCP socket's directory belong to it, and uid 1000 — a login
// account on most hosts, and the agent's uid here before — cannot read the
// agent's environment, which the host uid itself can.
func TestDockerAgentIsNoLocalUser(t *testing.T) {
	testenv.NeedRoot(t, "a root daemon gives docker sessions its host uid")
	const hostUID = 88888
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), fmt.Appendf(nil, "[sandbox]\nhost_uid = %d\n", hostUID), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerEnv(t, home, providerEnv())
	s.needSandbox(t, berth.SandboxDocker)
	sess := s.createRoot(t, map[string]any{"sandbox": berth.SandboxDocker})
	var pids []int
	for deadline := time.Now().Add(30 * time.Second); len(pids) == 0; {
		if pids = agentPIDs(sess.ID); len(pids) == 0 && time.Now().After(deadline) {
			t.Fatalf("no process of session %s on the host", sess.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := strings.Repeat("\t"+strconv.Itoa(hostUID), 4)
	for _, pid := range pids {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue // ended since
		}
		for _, line := range strings.Split(string(status), "\n") {
			if (strings.HasPrefix(line, "Uid:") || strings.HasPrefix(line, "Gid:")) && !strings.HasSuffix(line, want) {
				t.Errorf("agent process %d: %q, want %d throughout", pid, line, hostUID)
			}
		}
	}
	for _, path := range []string{sess.Workspace, filepath.Join(home, "run", "mcp-"+sess.ID)} {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != hostUID || st.Gid != hostUID {
			t.Errorf("%s belongs to %d:%d, want %d", path, st.Uid, st.Gid, hostUID)
		}
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	environ := func(uid int) (string, error) {
		cmd := exec.Command(cat, fmt.Sprintf("/proc/%d/environ", pids[0]))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := environ(hostUID); err != nil || !strings.Contains(out, "BERTH_SESSION_ID="+sess.ID) {
		t.Fatalf("the host uid reading its agent's environment: %v %q", err, out)
	}
	if out, err := environ(1000); err == nil || strings.Contains(out, "BERTH_SESSION_ID") {
		t.Errorf("uid 1000 read the agent's environment: %v %q", err, out)
	}
}
