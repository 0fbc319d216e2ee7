//go:build amd64 || arm64

package bwrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// runHelper runs the test binary inside a sandbox of p as the helper
// mode, and returns its output and status.
func runHelper(t *testing.T, p *Provider, mode string) (string, berth.ExitStatus) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := berth.SandboxConfig{
		SessionID: "ses_bwrap_seccomp", Workspace: t.TempDir(), Home: t.TempDir(),
		Binds: []berth.Bind{{Source: "/bin/busybox", Target: "/.berth/busybox"}, {Source: exe, Target: "/.berth/berth"}},
		Env:   map[string]string{helperVar: mode},
	}
	sb, err := p.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return runSpec(t, sb, berth.ProcSpec{Path: "/.berth/berth"})
}

// probeResults parses the helper's lines: name → errno.
func probeResults(t *testing.T, out string) map[string]syscall.Errno {
	t.Helper()
	got := map[string]syscall.Errno{}
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSpace(line), "\t")
		if len(f) < 2 {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		got[f[0]] = syscall.Errno(n)
	}
	return got
}

// Each call of the deny list fails with EPERM inside a sandbox (clone3
// with ENOSYS, so that glibc falls back to clone), while calls the list
// does not name (a plain fork, a personality query, ptrace requests other
// than attaching) still work; a Go program (the test binary) runs under
// the filter. The control: the same probes under the filter without its
// deny list fail otherwise (EFAULT, EINVAL, ESRCH…) for every probe made
// to tell the two apart, so the EPERMs are the filter's.
func TestSeccompDenies(t *testing.T) {
	out, st := runHelper(t, provider(t), "seccomp")
	if !st.Success() {
		t.Fatalf("the probe helper ended %+v:\n%s", st, out)
	}
	got := probeResults(t, out)
	for _, p := range probes() {
		e, ok := got[p.name]
		if !ok {
			t.Errorf("%s: not probed:\n%s", p.name, out)
			continue
		}
		if e != p.want {
			t.Errorf("%s: errno %d (%v) inside the sandbox, want %v", p.name, e, e, p.want)
		}
	}
	for _, p := range allowedProbes() {
		if e, ok := got[p.name]; !ok || e != 0 {
			t.Errorf("%s: must work under the filter, got errno %d (%v) (probed: %v)", p.name, e, e, ok)
		}
	}

	lenient := New(Options{})
	lenient.lenient = true
	out, st = runHelper(t, lenient, "seccomp")
	if !st.Success() {
		t.Fatalf("the probe helper ended %+v without the deny list:\n%s", st, out)
	}
	got = probeResults(t, out)
	distinct := 0
	for _, p := range probes() {
		if !p.distinct {
			continue
		}
		distinct++
		if e := got[p.name]; e == p.want {
			t.Errorf("control: %s fails with %v even without the deny list: its probe cannot tell the filter's refusal", p.name, e)
		}
	}
	t.Logf("%d of %d probes tell the filter's refusal from the kernel's", distinct, len(probes()))
}

// runX32 is the helper that makes a system call through the x32 table
// (amd64) or with an unknown architecture's number: the filter kills it
// before it prints.
func runX32() {
	_ = sys(uintptr(syscall.SYS_GETPID) | x32SyscallBit)
	fmt.Println("survived")
}

// A system call of the x32 ABI kills the process (SIGSYS): no rule can
// be sidestepped through another call table. The control: without the
// filter's x32 check the kernel would answer (ENOSYS on a kernel without
// x32, a pid with it), so surviving is what a missing check looks like.
func TestSeccompKillsX32(t *testing.T) {
	if !hasX32 {
		t.Skip("this architecture has no x32 ABI")
	}
	out, st := runHelper(t, provider(t), "x32")
	if strings.Contains(out, "survived") || st.Signal != "SIGSYS" {
		t.Errorf("an x32 system call was not killed: status %+v, output %q", st, out)
	}
}

// Every call the bwrap filter refuses with EPERM is refused to a
// container without capabilities by Docker's default profile too (the
// docker provider's base): the two providers stay in step, and a call
// Docker came to allow would show here.
func TestSeccompDenyListInStepWithDocker(t *testing.T) {
	profile := seccomp.DefaultProfile()
	allowed := func(name string) bool {
		for _, sc := range profile.Syscalls {
			if sc.Action != specs.ActAllow || !slices.Contains(sc.Names, name) {
				continue
			}
			// Allowed only with capabilities (the sandbox has none), or
			// only for some arguments (handled by rules of their own).
			if (sc.Includes != nil && len(sc.Includes.Caps) > 0) || len(sc.Args) > 0 {
				continue
			}
			return true
		}
		return false
	}
	for _, d := range append(slices.Clone(deniedCommon), deniedArch...) {
		if allowed(d.name) {
			t.Errorf("%s: refused in bwrap, allowed by Docker's default profile without capabilities", d.name)
		}
	}
}

// Node runs under the filter (clone3 refused with ENOSYS: glibc's threads
// fall back to clone; io_uring refused: libuv falls back to its thread
// pool): a worker thread, a child process, a file written through the
// thread pool.
func TestNodeRunsUnderTheFilter(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "not installed (Debian package nodejs)")
	}
	sb, _ := open(t, nil)
	var out, errOut strings.Builder
	script := `const { Worker } = require('worker_threads');
const fs = require('fs');
const cp = require('child_process');
new Worker("require('worker_threads').parentPort.postMessage(6*7)", { eval: true }).on('message', (n) => {
  fs.writeFileSync('node.txt', 'worker ' + n);
  fs.promises.readFile('node.txt', 'utf8').then((s) => {
    console.log(s + ' child ' + cp.execFileSync('/.berth/busybox', ['echo', 'ok']).toString().trim());
  });
});`
	p, err := sb.Start(context.Background(), berth.ProcSpec{Path: node, Args: []string{"-e", script}, Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil || !st.Success() || strings.TrimSpace(out.String()) != "worker 42 child ok" {
		t.Fatalf("node under the filter: %+v, %v, output %q, stderr %q", st, err, out.String(), errOut.String())
	}
}
