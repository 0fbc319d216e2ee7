package sandboxtest

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// memoryLimit is the memory limit of the memory case: far below what the
// hog asks, far above what busybox needs.
const memoryLimit = 64 << 20

// testMemoryLimit: a process that allocates past Limits.MemoryBytes is
// killed by the kernel (SIGKILL: its shell sees 137), the rest of the
// sandbox and the host go on, and the provider counts the kill in the
// status it reports (ExitStatus.OOMKills) unless Options.NoOOMCount. The
// control: an allocation well under the limit succeeds in the same
// sandbox. busybox dd with a block larger than the limit fills the whole
// block in memory before it writes it.
func testMemoryLimit(t *testing.T, s *suite) {
	if s.opts.NoMemoryLimit {
		t.Skip("the provider cannot enforce SandboxLimits.MemoryBytes here (Options.NoMemoryLimit)")
	}
	b := s.newBox(t, func(c *berth.SandboxConfig) { c.Limits.MemoryBytes = memoryLimit })
	r := b.run(t, `$BB dd if=/dev/zero of=/dev/null bs=8M count=2 2>/dev/null; echo "small=$?"
$BB dd if=/dev/zero of=/dev/null bs=160M count=1 2>/dev/null; echo "hog=$?"
echo `+done, nil)
	t.Logf("status %+v, output %q, stderr %q", r.status, r.stdout, r.stderr)
	if !strings.Contains(r.stdout, done) {
		t.Fatalf("the sandbox's shell did not survive the hog: %+v\nstdout %q\nstderr %q", r.status, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "small=0\n") {
		t.Fatalf("the control allocation of 8 MiB failed under a %d MiB limit: %q", memoryLimit>>20, r.stdout)
	}
	if !strings.Contains(r.stdout, "hog=137\n") {
		t.Errorf("the process that allocated 160 MiB under a %d MiB limit was not killed by the kernel: %q", memoryLimit>>20, r.stdout)
	}
	if !s.opts.NoOOMCount && r.status.OOMKills < 1 {
		t.Errorf("the process's status %+v reports no OOM kill in its sandbox", r.status)
	}
	// The host (this process stands for the daemon) still runs processes.
	if err := exec.Command(HostBusybox, "true").Run(); err != nil {
		t.Errorf("the host cannot run a process after the sandbox's OOM: %v", err)
	}
}

// tmpLimit is the size cap of /tmp in the tmp case.
const tmpLimit = 8 << 20

// testTmpSize: the sandbox's private /tmp holds at most Limits.TmpBytes:
// writing past it fails with ENOSPC ("No space left on device") and the
// file stops at the cap; the filesystem reports that size. The control:
// a file under the cap is written whole.
func testTmpSize(t *testing.T, s *suite) {
	b := s.newBox(t, func(c *berth.SandboxConfig) { c.Limits.TmpBytes = tmpLimit })
	r := b.run(t, `$BB dd if=/dev/zero of=/tmp/small bs=1M count=2 2>/dev/null; echo "small=$?"
$BB rm -f /tmp/small
$BB dd if=/dev/zero of=/tmp/fill bs=1M count=32; echo "fill=$?"
echo "size=$($BB stat -c %s /tmp/fill)"
echo "blocks=$($BB stat -f -c '%b*%S' /tmp)"
echo `+done, nil)
	t.Logf("output %q, stderr %q", r.stdout, r.stderr)
	if !strings.Contains(r.stdout, done) {
		t.Fatalf("the script did not run to its end: %+v\nstdout %q\nstderr %q", r.status, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "small=0\n") {
		t.Fatalf("the control write of 2 MiB to /tmp failed: %q %q", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "fill=0\n") || !strings.Contains(r.stderr, "No space left on device") {
		t.Errorf("writing 32 MiB to a /tmp capped at %d MiB did not fail with ENOSPC: %q %q", tmpLimit>>20, r.stdout, r.stderr)
	}
	var size int64 = -1
	for line := range strings.Lines(r.stdout) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "size="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				size = n
			}
		}
	}
	if size < 0 || size > tmpLimit {
		t.Errorf("the file in /tmp holds %d bytes, over the cap of %d", size, tmpLimit)
	}
}
