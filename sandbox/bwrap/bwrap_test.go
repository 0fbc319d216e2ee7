package bwrap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/sandboxtest"

	proc "github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/internal/testenv"
)

// helperVar makes the test binary, started inside a sandbox, print what
// it sees instead of running the tests.
const helperVar = "BERTH_BWRAP_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperVar) {
	case "seccomp":
		runProbes()
		os.Exit(0)
	case "x32":
		runX32()
		os.Exit(0)
	case "probe":
		// A daemon probing with a bwrap that never ends, until killed.
		_ = New(Options{Path: os.Getenv("BERTH_BWRAP_TEST_PATH")}).Probe(context.Background())
		os.Exit(0)
	}
	if os.Getenv(helperVar) == "1" {
		wd, _ := os.Getwd()
		_, err := os.ReadFile("/etc/shadow")
		fmt.Printf("helper uid=%d gid=%d wd=%s home=%s shadow=%v\n", os.Getuid(), os.Getgid(), wd, os.Getenv("HOME"), err == nil)
		os.Exit(0)
	}
	// The sandboxes of the tests see /etc as a daemon's do: through a
	// view (etcview.go).
	dir, err := os.MkdirTemp("", "berth-bwrap-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testEtcView = filepath.Join(dir, "etc")
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testEtcView is the view of /etc the tests' providers keep.
var testEtcView string

var (
	probeOnce sync.Once
	probeErr  error
)

// provider returns a bwrap provider. When bwrap does not work here the
// test skips, or fails when BERTH_REQUIRE_INTEGRATION=1.
func provider(t *testing.T) *Provider {
	t.Helper()
	p := New(Options{EtcView: testEtcView})
	probeOnce.Do(func() { probeErr = p.Probe(context.Background()) })
	if probeErr != nil {
		testenv.Missing(t, "bwrap", "it does not work here (install Debian's bubblewrap): %v", probeErr)
	}
	return p
}

// The suite, escape cases included. bwrap cannot bound pids (see the
// package doc), so the fork-loop case is skipped, saying so.
func TestSandboxSuite(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) berth.SandboxProvider { return provider(t) },
		sandboxtest.Options{Isolated: true, NoPidsLimit: !provider(t).LimitsPids(), NoMemoryLimit: provider(t).LimitsMemory() != nil})
}

// open opens a sandbox on fresh directories, with busybox bound in.
func open(t *testing.T, edit func(*berth.SandboxConfig)) (*Sandbox, berth.SandboxConfig) {
	t.Helper()
	cfg := berth.SandboxConfig{
		SessionID: "ses_bwrap_test",
		Workspace: t.TempDir(),
		Home:      t.TempDir(),
		Binds:     []berth.Bind{{Source: sandboxtest.HostBusybox, Target: "/.berth/busybox"}},
	}
	if edit != nil {
		edit(&cfg)
	}
	sb, err := provider(t).Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb.(*Sandbox), cfg
}

// run runs a busybox shell script to completion and returns its stdout.
func run(t *testing.T, sb *Sandbox, script string) (string, berth.ExitStatus) {
	t.Helper()
	return runSpec(t, sb, berth.ProcSpec{Path: "/.berth/busybox", Args: []string{"sh", "-c", script}, Stdin: strings.NewReader("")})
}

// runSpec runs spec to completion and returns its stdout; its stderr goes
// to the test's log.
func runSpec(t *testing.T, sb berth.Sandbox, spec berth.ProcSpec) (string, berth.ExitStatus) {
	t.Helper()
	var out, errOut strings.Builder
	spec.Stdout, spec.Stderr = &out, &errOut
	p, err := sb.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if errOut.Len() > 0 {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), st
}

func TestProbeWithoutBwrap(t *testing.T) {
	err := New(Options{Path: "/nonexistent/bwrap"}).Probe(context.Background())
	if !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("Probe = %v, want EUnavailable", err)
	}
	if !strings.Contains(berth.ErrorMessage(err), "not installed") {
		t.Errorf("message %q does not say why", berth.ErrorMessage(err))
	}
}

// The sandbox's identity, without and with network (a daemon that is not
// root then starts bwrap as uid 0 of a user namespace of its own, where
// bwrap would keep every capability in the bounding set).
func TestIdentity(t *testing.T) {
	for _, network := range []bool{false, true} {
		t.Run(fmt.Sprintf("network=%v", network), func(t *testing.T) {
			if network && slirpPath() == "" {
				testenv.Missing(t, "slirp4netns", "not installed (Debian package slirp4netns)")
			}
			sb, cfg := open(t, func(c *berth.SandboxConfig) { c.Network = network })
			out, st := run(t, sb, `B=/.berth/busybox
$B id -u; $B id -g; $B id -un; $B hostname; echo "HOME=$HOME"
$B grep -E '^Cap(Eff|Prm|Inh|Bnd|Amb)' /proc/self/status
$B grep NoNewPrivs /proc/self/status
$B unshare -U true 2>/dev/null && echo NESTED_USERNS
$B ls /etc/shadow 2>/dev/null && echo SHADOW
touch /new-in-root 2>/dev/null && echo ROOT_WRITABLE
$B ls /proc | $B grep -c '^[0-9]'`)
			if !st.Success() {
				t.Fatalf("status %+v", st)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			want := []string{"1000", "1000", "berth", "berth", "HOME=" + cfg.Home,
				"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
				"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"}
			if len(lines) < len(want) {
				t.Fatalf("output %q", out)
			}
			for i, w := range want {
				if lines[i] != w {
					t.Errorf("line %d = %q, want %q", i, lines[i], w)
				}
			}
			for _, bad := range []string{"NESTED_USERNS", "SHADOW", "ROOT_WRITABLE"} {
				if strings.Contains(out, bad) {
					t.Errorf("%s in %q", bad, out)
				}
			}
			// Only the sandbox's init, the shell and ls/grep are in its /proc.
			if n := lines[len(lines)-1]; n > "5" || len(n) > 1 {
				t.Errorf("%s processes visible in the sandbox's /proc", n)
			}
		})
	}
}

func TestNoDescriptorLeaks(t *testing.T) {
	sb, _ := open(t, nil)
	out, _ := run(t, sb, `/.berth/busybox ls /proc/self/fd`)
	fds := strings.Fields(out)
	// 0-2, and the directory ls reads.
	if len(fds) > 4 {
		t.Errorf("descriptors in the sandbox: %v", fds)
	}
}

// The daemon's own binary (here the test binary, a Go program) runs
// inside when bound in.
func TestGoBinaryInside(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sb, cfg := open(t, func(c *berth.SandboxConfig) {
		c.Binds = append(c.Binds, berth.Bind{Source: exe, Target: "/.berth/berth"})
		c.Env = map[string]string{helperVar: "1"}
	})
	var out strings.Builder
	p, err := sb.Start(context.Background(), berth.ProcSpec{Path: "/.berth/berth", Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Fatalf("status %+v, %v: %s", st, err, out.String())
	}
	want := fmt.Sprintf("helper uid=1000 gid=1000 wd=%s home=%s shadow=false\n", cfg.Workspace, cfg.Home)
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestOpenFilesLimit(t *testing.T) {
	sb, _ := open(t, func(c *berth.SandboxConfig) { c.Limits.OpenFiles = 64 })
	out, st := run(t, sb, `ulimit -n; ulimit -Hn`)
	if !st.Success() || out != "64\n64\n" {
		t.Errorf("ulimit: %q, %+v", out, st)
	}
}

// With network on, the sandbox has a network namespace of its own (the
// host's is never shared): its loopback and slirp4netns's tap0, none of
// the host's interfaces.
func TestNetworkOwnNamespace(t *testing.T) {
	if slirpPath() == "" {
		testenv.Missing(t, "slirp4netns", "not installed (Debian package slirp4netns)")
	}
	sb, _ := open(t, func(c *berth.SandboxConfig) { c.Network = true })
	out, _ := run(t, sb, `/.berth/busybox readlink /proc/self/ns/net; /.berth/busybox cat /proc/net/dev`)
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, host) {
		t.Errorf("the sandbox is in the host's network namespace %s:\n%s", host, out)
	}
	if !strings.Contains(out, "tap0:") || !strings.Contains(out, "lo:") {
		t.Errorf("the sandbox's interfaces are not its loopback and tap0:\n%s", out)
	}
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		if i.Name != "lo" && strings.Contains(out, i.Name+":") {
			t.Errorf("the host's interface %s is in the sandbox:\n%s", i.Name, out)
		}
	}
}

func TestCloseEndsProcesses(t *testing.T) {
	sb, _ := open(t, nil)
	p, err := sb.Start(context.Background(), berth.ProcSpec{Path: "/.berth/busybox", Args: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ := p.Wait()
	if st.Signal != "SIGKILL" {
		t.Errorf("status %+v, want SIGKILL", st)
	}
	for _, r := range []io.ReadCloser{p.Stdout(), p.Stderr()} {
		_ = r.Close()
	}
	if _, err := sb.Start(ctx, berth.ProcSpec{Path: "/.berth/busybox"}); !berth.IsCode(err, berth.EUnavailable) {
		t.Errorf("Start after Close: %v, want EUnavailable", err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	testenv.Touch(t, file)
	p := provider(t)
	for _, cfg := range []berth.SandboxConfig{
		{Workspace: ""},
		{Workspace: "relative"},
		{Workspace: "/"},
		{Workspace: filepath.Join(dir, "missing")},
		{Workspace: file},
		{Workspace: dir, Home: "relative"},
		{Workspace: dir, Home: file},
		{Workspace: dir, Binds: []berth.Bind{{Source: "relative", Target: "/x"}}},
		{Workspace: dir, Binds: []berth.Bind{{Source: filepath.Join(dir, "missing"), Target: "/x"}}},
		{Workspace: dir, Binds: []berth.Bind{{Source: file, Target: "relative"}}},
		{Workspace: dir, Binds: []berth.Bind{{Source: dir, Target: "/"}}},
	} {
		_, err := p.Open(ctx, cfg)
		if !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("Open(%+v) = %v, want EInvalid", cfg, err)
		}
		if err != nil && strings.Contains(berth.ErrorMessage(err), dir) {
			t.Errorf("message %q holds a host path", berth.ErrorMessage(err))
		}
	}

	sb, _ := open(t, nil)
	for _, tc := range []struct {
		spec berth.ProcSpec
		code string
	}{
		{berth.ProcSpec{}, berth.EInvalid},
		{berth.ProcSpec{Path: "true", Env: []string{"NOEQUALS"}}, berth.EInvalid},
		{berth.ProcSpec{Path: "berth-no-such-command"}, berth.EUnavailable},
		{berth.ProcSpec{Path: "/.berth/none"}, berth.EUnavailable},
		// The daemon's files are not inside, so not startable.
		{berth.ProcSpec{Path: file}, berth.EUnavailable},
		{berth.ProcSpec{Path: "true", Dir: "missing"}, berth.EInvalid},
		{berth.ProcSpec{Path: "true", Dir: dir}, berth.EInvalid},
	} {
		if _, err := sb.Start(ctx, tc.spec); !berth.IsCode(err, tc.code) {
			t.Errorf("Start(%+v) = %v, want %s", tc.spec, err, tc.code)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sb.Start(canceled, berth.ProcSpec{Path: "true"}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: %v", err)
	}
	// /tmp and the system directories are fine working directories.
	for _, d := range []string{"/tmp", "/usr/bin", "/"} {
		p, err := sb.Start(ctx, berth.ProcSpec{Path: "true", Dir: d, Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
		if err != nil {
			t.Errorf("Dir %s: %v", d, err)
			continue
		}
		if st, _ := p.Wait(); !st.Success() {
			t.Errorf("Dir %s: %+v", d, st)
		}
	}
}

func TestStatusOf(t *testing.T) {
	cases := map[berth.ExitStatus]berth.ExitStatus{
		{}:                             {},
		{Code: 1}:                      {Code: 1},
		{Code: 128}:                    {Code: 128},
		{Code: 129}:                    {Code: 129, Signal: "SIGHUP"},
		{Code: 143}:                    {Code: 143, Signal: "SIGTERM"},
		{Code: 192}:                    {Code: 192, Signal: "SIG64"},
		{Code: 193}:                    {Code: 193},
		{Code: 255}:                    {Code: 255},
		{Code: -1}:                     {Code: -1},
		{Code: 137, Signal: "SIGKILL"}: {Code: 137, Signal: "SIGKILL"},
	}
	for in, want := range cases {
		if got := statusOf(in); got != want {
			t.Errorf("statusOf(%+v) = %+v, want %+v", in, got, want)
		}
	}
}

func TestResolve(t *testing.T) {
	ms := mounts{
		{kind: roBind, src: "/usr", dst: "/usr"},
		{kind: symlink, src: "usr/bin", dst: "/bin"},
		{kind: symlink, src: "/usr/lib", dst: "/lib"},
		{kind: tmpfs, dst: "/tmp"},
		{kind: rwBind, src: "/host/ws", dst: "/tmp/t/ws"},
		{kind: roBind, src: "/host/agent", dst: "/tmp/t/ws/.agent"},
		{kind: remountRO, dst: "/"},
	}
	cases := []struct {
		in, host string
		exists   bool
	}{
		{"/usr/bin/sh", "/usr/bin/sh", true},
		{"/bin/sh", "/usr/bin/sh", true},
		{"/lib/x", "/usr/lib/x", true},
		{"/tmp", "", true},
		{"/tmp/other", "", false},
		{"/tmp/t", "", true},
		{"/tmp/t/ws/a/../b", "/host/ws/b", true},
		{"/tmp/t/ws/.agent/run", "/host/agent/run", true},
		{"/", "", true},
		{"/etc", "", false},
		{"/work", "", false},
	}
	for _, tc := range cases {
		host, exists := ms.resolve(tc.in)
		if host != tc.host || exists != tc.exists {
			t.Errorf("resolve(%q) = %q, %v; want %q, %v", tc.in, host, exists, tc.host, tc.exists)
		}
	}
}

// The sandbox's environment reaches the sandbox only: not bwrap's loader
// outside (LD_PRELOAD would act there as the daemon), not bwrap's command
// line or environment on the host.
func TestEnvironmentStaysInside(t *testing.T) {
	const secret = "sk-berth-test-secret"
	sb, _ := open(t, func(c *berth.SandboxConfig) {
		c.Env = map[string]string{"API_KEY": secret, "LD_PRELOAD": "/nonexistent/berth-evil.so"}
	})
	var errOut strings.Builder
	p, err := sb.Start(context.Background(), berth.ProcSpec{
		Path: "/.berth/busybox", Args: []string{"sh", "-c", "env; echo ready; exec /.berth/busybox sleep 1000"},
		Stdin: strings.NewReader(""), Stderr: &errOut,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = p.Stop(context.Background(), 0)
		_ = p.Stdout().Close()
	}()
	var out strings.Builder
	sc := bufio.NewScanner(p.Stdout())
	for sc.Scan() && sc.Text() != "ready" {
		out.WriteString(sc.Text() + "\n")
	}
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", p.Pid(), f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) || strings.Contains(string(b), "LD_PRELOAD") {
			t.Errorf("the sandbox's environment shows in bwrap's %s on the host", f)
		}
	}
	// Stop returns once the stderr copy is over.
	if _, err := p.Stop(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "API_KEY="+secret) || !strings.Contains(out.String(), "LD_PRELOAD=") {
		t.Errorf("the environment did not reach the sandbox: %q", out.String())
	}
	if strings.Contains(errOut.String(), "ld.so") {
		t.Errorf("LD_PRELOAD acted on bwrap: %q", errOut.String())
	}
}

// A bwrap that fails before making the sandbox is a Start error with its
// words kept for the log.
func TestBwrapFailsEarly(t *testing.T) {
	provider(t)
	ctx := context.Background()
	sb, err := New(Options{Path: "/bin/sh"}).Open(ctx, berth.SandboxConfig{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	// /bin/sh takes bwrap's first option for an unknown one and exits.
	_, err = sb.Start(ctx, berth.ProcSpec{Path: "true"})
	if !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("Start = %v, want EUnavailable", err)
	}
	if !errors.Is(err, errNoSandbox) {
		t.Errorf("cause %v, want errNoSandbox", err)
	}
	t.Logf("Start: %v", err)
}

// fakeTool writes an executable shell script that any user may run (a
// root daemon runs bwrap as the host uid) and returns its path.
func fakeTool(t *testing.T, name, script string) string {
	t.Helper()
	path := filepath.Join(sandboxtest.WorldDir(t), name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A bwrap that fails says why in the start's error message, in its own
// words, whether the caller takes stderr or not; a caller's writer gets
// them too.
func TestStartFailureSaysWhy(t *testing.T) {
	provider(t)
	ctx := context.Background()
	const words = "bwrap: setting up uid map: Permission denied"
	fake := fakeTool(t, "bwrap", "echo '"+words+"' >&2; echo 'second line' >&2; exit 1")
	for _, takes := range []bool{false, true} {
		sb, err := New(Options{Path: fake}).Open(ctx, berth.SandboxConfig{Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		var errOut strings.Builder
		spec := berth.ProcSpec{Path: "true", Stdin: strings.NewReader(""), Stdout: io.Discard}
		if takes {
			spec.Stderr = &errOut
		}
		_, err = sb.Start(ctx, spec)
		msg := berth.ErrorMessage(err)
		want := "bwrap: the sandbox did not start: bwrap ended before the process started: " + words + "; second line"
		if !berth.IsCode(err, berth.EUnavailable) || msg != want {
			t.Errorf("caller takes stderr %v: Start = %v; want EUnavailable %q", takes, err, want)
		}
		if takes && !strings.Contains(errOut.String(), words) {
			t.Errorf("the caller's stderr did not get bwrap's words: %q", errOut.String())
		}
		_ = sb.Close(ctx)
	}
}

// oneLine joins a tool's lines, drops control characters and bounds the
// result.
func TestOneLine(t *testing.T) {
	if got := oneLine("bwrap: a\n\nb\x1b[31m\r\n  c  \n"); got != "bwrap: a; b[31m; c" {
		t.Errorf("oneLine = %q", got)
	}
	if got := oneLine(strings.Repeat("é", maxWords)); len(got) > maxWords+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("oneLine of %d bytes = %d bytes", 2*maxWords, len(got))
	}
}

// Trial runs a sandbox as a session's, without and with network, and
// says why in the failing tool's words when one does not start.
func TestTrial(t *testing.T) {
	p := provider(t)
	ctx := context.Background()
	// A temporary directory of the test's own, which a root daemon's
	// host uid may cross to its stage, to see what the trial leaves.
	tmp := sandboxtest.WorldDir(t)
	t.Setenv("TMPDIR", tmp)
	if err := p.Trial(ctx, false); err != nil {
		t.Errorf("Trial without network: %v", err)
	}
	if slirpPath() == "" {
		testenv.Missing(t, "slirp4netns", "not installed (Debian package slirp4netns)")
	}
	if err := p.Trial(ctx, true); err != nil {
		t.Errorf("Trial with network: %v", err)
	}
	fake := fakeTool(t, "slirp4netns", "echo 'slirp4netns: cannot open /dev/net/tun' >&2; exit 1")
	err := New(Options{Slirp: fake}).Trial(ctx, true)
	if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(berth.ErrorMessage(err), "slirp4netns failed: slirp4netns: cannot open /dev/net/tun") {
		t.Errorf("Trial with a failing slirp4netns = %v, want its words", err)
	}
	// The trials leave nothing behind: no directory, no stage.
	for _, pattern := range []string{"berth-bwrap-trial-*", "berth-bwrap-stage-*"} {
		if left, _ := filepath.Glob(filepath.Join(tmp, pattern)); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}
}

// A daemon SIGKILLed while it probes leaves no bwrap behind: the probe's
// bwrap dies with it. (Here a "bwrap" that sleeps: no bwrap is needed.)
func TestAProbeDiesWithItsDaemon(t *testing.T) {
	// Where the host uid a root daemon drops to can run it.
	dir, err := os.MkdirTemp("", "berth-probe-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A sleep no other process has: the probe runs as the host uid
	// (a root daemon drops to it), so it is found by its command line.
	nap := fmt.Sprintf("59.%d", time.Now().UnixNano()%1e9)
	fake := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexec sleep "+nap+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command(self, "-test.run=^$")
	daemon.Env = append(os.Environ(), helperVar+"=probe", "BERTH_BWRAP_TEST_PATH="+fake)
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		_ = daemon.Process.Kill()
		_ = daemon.Wait()
	}
	find := func() int {
		for _, pid := range proc.PIDs() {
			if args, err := proc.Cmdline(pid); err == nil && slices.Equal(args, []string{"sleep", nap}) {
				return pid
			}
		}
		return 0
	}
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		pid = find()
	}
	if pid == 0 {
		stop()
		t.Fatal("the probe's bwrap never started")
	}
	// Pinned while it runs: once gone, its pid may be another process's.
	if pinned, err := os.FindProcess(pid); err == nil {
		t.Cleanup(func() { _ = pinned.Kill() })
	}
	stop()
	for deadline := time.Now().Add(5 * time.Second); ; {
		// Gone, or a zombie waiting for init to reap it.
		st, err := proc.ReadStat(pid)
		if err != nil || !st.Live() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the probe's bwrap (pid %d) outlived its daemon by 5 s: %+v", pid, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
