package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/bwrap"

	"github.com/berth-sh/berth/internal/testenv"
)

// Through the daemon, its shims and the small shim, a bwrap session runs
// under its limits: create with memory_mb shows them in the Session
// (sandbox.limits), an ordinary agent turn works under the seccomp
// filter, a command allocating past memory_mb is killed (137) while the
// session goes on, /tmp fills at [sandbox] tmp_mb with ENOSPC, and the
// agent's process runs with a seccomp filter. memory_mb asked of the host
// provider, which cannot enforce it, is 503 saying why, and so is
// memory_mb of bwrap for a daemon that is not root and was delegated no
// cgroup (the rest is checked without it); memory_mb past [sandbox]
// max_memory_mb is 400.
func TestSandboxLimitsThroughTheAPI(t *testing.T) {
	s := startServerEnv(t, t.TempDir(), []string{"BERTH_SANDBOX_TMP_MB=16", "BERTH_SANDBOX_MAX_MEMORY_MB=4096"})
	s.needSandbox(t, berth.SandboxBwrap)
	var e json.RawMessage
	if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "host", "memory_mb": 256}, &e); st != 503 || !strings.Contains(string(e), "memory_mb cannot be enforced") {
		t.Errorf("host with memory_mb = %d %s, want 503 saying why", st, e)
	}
	if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "bwrap", "memory_mb": 8192}, &e); st != 400 || !strings.Contains(string(e), "max_memory_mb") {
		t.Errorf("memory_mb over the cap = %d %s, want 400", st, e)
	}
	// A daemon that is not root has a memory cgroup only where one was
	// delegated to it (the daemon and the test run as the same user).
	memErr := bwrap.New(bwrap.Options{}).LimitsMemory()
	if memErr != nil && os.Geteuid() == 0 {
		testenv.Missing(t, "a memory cgroup", "%v", memErr)
	}
	memoryMB := 128
	if memErr != nil {
		// Refused, saying why, rather than run unbounded.
		if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "bwrap", "memory_mb": 128}, &e); st != 503 ||
			!strings.Contains(string(e), "memory_mb cannot be enforced by sandbox bwrap") || !strings.Contains(string(e), "needs a memory cgroup this daemon can make") {
			t.Errorf("bwrap with memory_mb and no memory cgroup = %d %s, want 503 saying why", st, e)
		}
		memoryMB = 0
	}
	var sess berth.Session
	st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "bwrap", "memory_mb": memoryMB}, &sess)
	if st != 201 || sess.State != berth.StateActive {
		t.Fatalf("create = %d %+v (%v)\n%s", st, sess.State, sess.Failure, s.log)
	}
	if sess.Sandbox.Limits != (berth.SandboxLimitsInfo{MemoryMB: memoryMB, TmpMB: 16}) {
		t.Errorf("sandbox.limits = %+v, want memory_mb %d, tmp_mb 16", sess.Sandbox.Limits, memoryMB)
	}
	path := "/v1/sessions/" + sess.ID
	var r berth.TurnResult
	if st, err := s.api("POST", path+"/prompts?wait=true", map[string]string{"text": "echo under the filter"}, &r); st != 200 || r.Text != "under the filter" {
		t.Fatalf("a turn under the limits = %d %+v %v", st, r, err)
	}
	sh := func(script string) berth.ExecResult {
		var r berth.ExecResult
		if st, err := s.api("POST", path+"/exec", map[string]any{"command": []string{"sh", "-c", script}, "timeout_seconds": 30}, &r); st != 200 {
			t.Fatalf("exec %q = %d %v", script, st, err)
		}
		return r
	}
	if r := sh("busybox dd if=/dev/zero of=/dev/null bs=400M count=1; echo hog=$?"); memoryMB > 0 && !strings.Contains(r.Stdout, "hog=137") {
		t.Errorf("allocating 400 MiB under memory_mb 128: %+v", r)
	}
	if r := sh("busybox dd if=/dev/zero of=/tmp/fill bs=1M count=64; echo fill=$?"); !strings.Contains(r.Stdout, "fill=1") || !strings.Contains(r.Stderr, "No space left") {
		t.Errorf("filling /tmp past tmp_mb 16: %+v", r)
	}
	if r := sh("grep Seccomp: /proc/self/status"); !strings.Contains(r.Stdout, "Seccomp:\t2") {
		t.Errorf("no seccomp filter inside: %+v", r)
	}
	if st, _ := s.api("POST", path+"/prompts?wait=true", map[string]string{"text": "echo still here"}, &r); st != 200 || r.Text != "still here" {
		t.Fatalf("a turn after the OOM kill = %d %+v", st, r)
	}

	// The CLI: create --memory-mb, and show prints the limits.
	if memoryMB > 0 {
		id := strings.TrimSpace(s.cli(t, "create", "-q", "--agent", "demo", "--sandbox", "bwrap", "--memory-mb", "200"))
		if out := s.cli(t, "show", id); !strings.Contains(out, "bwrap, no network, memory 200 MiB, /tmp 16 MiB") {
			t.Errorf("berth show does not print the limits:\n%s", out)
		}
	} else if code, out := s.cliFails(t, "create", "--agent", "demo", "--sandbox", "bwrap", "--memory-mb", "200"); code == 0 || !strings.Contains(out, "memory_mb cannot be enforced") {
		t.Errorf("berth create --memory-mb without a memory cgroup: %d %s", code, out)
	}
	if code, out := s.cliFails(t, "create", "--agent", "demo", "--sandbox", "host", "--memory-mb", "200"); code == 0 || !strings.Contains(out, "memory_mb cannot be enforced") {
		t.Errorf("berth create --memory-mb on host: %d %s", code, out)
	}
}
