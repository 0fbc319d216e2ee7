package sandboxtest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// escapeCases each try to get out of an isolating provider's sandbox.
// Every script ends by printing done, so that a script that broke early
// cannot pass for a sandbox that held.
var escapeCases = []testCase{
	{"HostSecrets", testHostSecrets},
	{"DaemonFiles", testDaemonFiles},
	{"WriteOutside", testWriteOutside},
	{"PrivateTmp", testPrivateTmp},
	{"DaemonEnvironment", testDaemonEnvironment},
	{"Loopback", testLoopback},
	{"NetworkLoopback", testNetworkLoopback},
	{"DaemonHomeInWorkspace", testDaemonHomeInWorkspace},
	{"SetIDPlant", testSetIDPlant},
	{"OtherSession", testOtherSession},
	{"HostProcesses", testHostProcesses},
	{"Outlive", testOutlive},
	{"ForkLoop", testForkLoop},
	{"MemoryLimit", testMemoryLimit},
	{"TmpSize", testTmpSize},
}

// done ends every escape script.
const done = "SCRIPT-DONE"

// runEscape runs script, which must get to its end, and returns its
// output.
func runEscape(t *testing.T, b *box, script string) string {
	t.Helper()
	r := b.run(t, script+"\necho "+done, nil)
	if !strings.Contains(r.stdout, done) {
		t.Fatalf("the script did not run to its end: %+v\nstdout %q\nstderr %q", r.status, r.stdout, r.stderr)
	}
	return r.stdout
}

// quote quotes s for sh.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// testHostSecrets: /etc/shadow and the like are not readable.
func testHostSecrets(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	out := runEscape(t, b, `cat /etc/shadow && echo SHADOW_READ
cat /etc/gshadow && echo GSHADOW_READ
ls /etc/ssl/private && echo SSL_PRIVATE_LISTED
echo control > control.txt && cat control.txt`)
	for _, bad := range []string{"SHADOW_READ", "GSHADOW_READ", "SSL_PRIVATE_LISTED"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: the sandbox read a host secret", bad)
		}
	}
	if !strings.Contains(out, "control") {
		t.Errorf("the control file in the workspace could not be read: %q", out)
	}
	// Whatever the sandbox has at /etc/shadow, it must not be the host's.
	if host, err := os.ReadFile("/etc/shadow"); err == nil {
		for _, line := range strings.Split(string(host), "\n") {
			if len(line) > 8 && strings.Contains(out, line) {
				t.Errorf("the output holds a line of the host's /etc/shadow")
				break
			}
		}
	}
}

// testDaemonFiles: a daemon's home outside the workspace (a secret, a
// Unix socket) and the daemon's working directory are out of sight.
func testDaemonFiles(t *testing.T, s *suite) {
	daemon := t.TempDir()
	secret := "daemon-secret-" + newMarker()
	if err := os.WriteFile(filepath.Join(daemon, "secret.txt"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(daemon, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(daemon, "sub", "token"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(daemon, "berth.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	b := s.newBox(t, nil)
	out := runEscape(t, b, fmt.Sprintf(`D=%s
cat $D/secret.txt $D/sub/token
ls -la $D $D/sub
[ -e $D/berth.sock ] && echo SOCKET_VISIBLE
ls -la %s`, quote(daemon), quote(cwd)))
	if strings.Contains(out, secret) {
		t.Error("the sandbox read the daemon's secret")
	}
	for _, name := range []string{"secret.txt", "berth.sock", "SOCKET_VISIBLE"} {
		if strings.Contains(out, name) {
			t.Errorf("the sandbox saw %s in the daemon's home", name)
		}
	}
	ents, _ := os.ReadDir(cwd)
	for _, e := range ents {
		if len(e.Name()) > 4 && strings.Contains(out, e.Name()) {
			t.Errorf("the sandbox listed %s of the daemon's working directory", e.Name())
		}
	}
}

// testWriteOutside: writes anywhere but the workspace and HOME do not
// reach the host.
func testWriteOutside(t *testing.T, s *suite) {
	daemon := t.TempDir()
	b := s.newBox(t, nil)
	name := "escape-" + b.marker
	targets := []string{
		filepath.Join(filepath.Dir(b.cfg.Workspace), name),
		filepath.Join(filepath.Dir(b.cfg.Home), name),
		filepath.Join("/", name),
		filepath.Join(os.TempDir(), name),
		filepath.Join("/tmp", name),
		filepath.Join("/var/tmp", name),
		filepath.Join("/usr", name),
		filepath.Join("/etc", name),
		filepath.Join(daemon, name),
	}
	t.Cleanup(func() {
		for _, p := range targets {
			_ = os.Remove(p)
		}
	})
	var script strings.Builder
	for _, p := range targets {
		fmt.Fprintf(&script, "echo escaped > %s 2>/dev/null\n", quote(p))
	}
	script.WriteString(`echo control > ` + quote(name) + `
echo control > "$HOME/"` + quote(name))
	runEscape(t, b, script.String())
	for _, p := range targets {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the sandbox wrote %s on the host", p)
		}
	}
	for _, dir := range []string{b.cfg.Workspace, b.cfg.Home} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != "control\n" {
			t.Errorf("the control write to %s did not land: %q, %v", dir, got, err)
		}
	}
}

// testPrivateTmp: the sandbox's /tmp is not the host's, either way.
func testPrivateTmp(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	hostFile := filepath.Join(os.TempDir(), "host-"+b.marker)
	if err := os.WriteFile(hostFile, []byte("host tmp "+b.marker), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(hostFile) })
	inside := "/tmp/inside-" + b.marker
	t.Cleanup(func() { _ = os.Remove(inside) })
	out := runEscape(t, b, fmt.Sprintf(`cat %s && echo HOST_TMP_READ
echo inside > %s && cat %s`, quote(hostFile), quote(inside), quote(inside)))
	if strings.Contains(out, "HOST_TMP_READ") || strings.Contains(out, "host tmp") {
		t.Error("the sandbox read a file of the host's /tmp")
	}
	if !strings.Contains(out, "inside") {
		t.Errorf("the sandbox has no writable /tmp of its own: %q", out)
	}
	if _, err := os.Lstat(inside); err == nil {
		t.Error("the sandbox's /tmp file is on the host")
	}
}

// testDaemonEnvironment: nothing of the daemon's environment reaches the
// sandbox, in any process's environment there.
func testDaemonEnvironment(t *testing.T, s *suite) {
	secret := "daemon-env-" + newMarker()
	t.Setenv("BERTH_SANDBOXTEST_DAEMON_SECRET", secret)
	b := s.newBox(t, nil)
	out := runEscape(t, b, `env
cat /proc/self/environ
for f in /proc/[0-9]*/environ; do cat "$f" 2>/dev/null; echo; done`)
	if strings.Contains(out, secret) || strings.Contains(out, "BERTH_SANDBOXTEST_DAEMON_SECRET") {
		t.Error("the daemon's environment is visible in the sandbox")
	}
	if !strings.Contains(out, b.marker) {
		t.Errorf("the sandbox's own environment is not visible: %q", out)
	}
}

// testLoopback: with Network false, a TCP service of the host, on its
// loopback or its other addresses, is out of reach, while the sandbox's
// own loopback works.
func testLoopback(t *testing.T, s *suite) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	var accepted atomic.Int32
	testenv.Serve(t, ln, func(c net.Conn) {
		accepted.Add(1)
		_, _ = c.Write([]byte("HOST-SERVICE\n"))
	})

	addrs := []string{"127.0.0.1"}
	if ifaddrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifaddrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				addrs = append(addrs, n.IP.String())
			}
		}
	}
	b := s.newBox(t, func(c *berth.SandboxConfig) { c.Network = false })
	var script strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&script, "echo hi | $BB nc -w 2 %s %d && echo REACHED-%s\n", a, port, a)
	}
	// The control: the same nc reaches an echo service on the sandbox's
	// own loopback.
	script.WriteString(`$BB nc -l -p 47001 -e $BB cat &
L=$!
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  echo own-loopback | $BB nc -w 2 127.0.0.1 47001 && break
  $BB sleep 0.1
done
kill $L 2>/dev/null
wait`)
	out := runEscape(t, b, script.String())
	if strings.Contains(out, "REACHED") || strings.Contains(out, "HOST-SERVICE") || accepted.Load() > 0 {
		t.Errorf("the sandbox reached the host's TCP service (%d connection(s)): %q", accepted.Load(), out)
	}
	if !strings.Contains(out, "own-loopback") {
		t.Errorf("nc could not reach the sandbox's own loopback, so the check proves nothing: %q", out)
	}
}

// testOtherSession: another sandbox's workspace and home are out of
// sight and out of reach.
func testOtherSession(t *testing.T, s *suite) {
	other := s.newBox(t, nil)
	secret := "other-session-" + other.marker
	if r := other.run(t, `echo `+secret+` > secret.txt && echo `+secret+` > "$HOME/secret.txt"`, nil); !r.status.Success() {
		t.Fatalf("the other sandbox could not write: %+v %q", r.status, r.stderr)
	}
	b := s.newBox(t, nil)
	out := runEscape(t, b, fmt.Sprintf(`W=%s; H=%s
cat $W/secret.txt $H/secret.txt
ls -la $W $H
echo intruder > $W/intruder.txt 2>/dev/null
echo intruder > $H/intruder.txt 2>/dev/null`, quote(other.cfg.Workspace), quote(other.cfg.Home)))
	if strings.Contains(out, secret) || strings.Contains(out, "secret.txt") {
		t.Error("the sandbox saw another session's files")
	}
	for _, dir := range []string{other.cfg.Workspace, other.cfg.Home} {
		if _, err := os.Lstat(filepath.Join(dir, "intruder.txt")); err == nil {
			t.Errorf("the sandbox wrote into another session's %s", dir)
		}
	}
}

// testHostProcesses: host processes can be neither seen nor signalled.
func testHostProcesses(t *testing.T, s *suite) {
	victim := exec.Command(HostBusybox, "sleep", "1000")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = victim.Wait()
		close(exited)
	}()
	defer func() {
		_ = victim.Process.Kill()
		<-exited
	}()
	b := s.newBox(t, nil)
	out := runEscape(t, b, fmt.Sprintf(`kill -0 %d 2>/dev/null && echo TEST_PROCESS_VISIBLE
kill -KILL %d 2>/dev/null && echo VICTIM_KILLED
ls /proc/%d >/dev/null 2>&1 && echo VICTIM_IN_PROC`, os.Getpid(), victim.Process.Pid, victim.Process.Pid))
	for _, bad := range []string{"TEST_PROCESS_VISIBLE", "VICTIM_KILLED", "VICTIM_IN_PROC"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: a host process is within the sandbox's reach", bad)
		}
	}
	select {
	case <-exited:
		t.Error("the host process was killed from the sandbox")
	case <-time.After(100 * time.Millisecond):
	}
}

// testOutlive: processes that leave the group (setsid, a double fork, a
// cleared environment) or stay in it but ignore SIGTERM and SIGHUP all end
// with the sandbox's process.
func testOutlive(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	// Each lingerer has its own name as $0, the marker in it, so that it
	// is found even with its environment cleared, and told apart from
	// the others.
	loop := quote(`trap "" HUP TERM INT; while :; do ` + b.bb + ` sleep 1; done`)
	names := make([]string, 4)
	for i := range names {
		names[i] = fmt.Sprintf("%s-lingerer-%d", b.marker, i)
	}
	p := b.start(t, b.shell(fmt.Sprintf(`$BB setsid $BB sh -c %[1]s %[2]s </dev/null >/dev/null 2>&1 &
( $BB setsid $BB sh -c %[1]s %[3]s </dev/null >/dev/null 2>&1 & ) &
$BB env -i $BB setsid $BB sh -c %[1]s %[4]s </dev/null >/dev/null 2>&1 &
$BB sh -c %[1]s %[5]s </dev/null >/dev/null 2>&1 &
echo ready
exec $BB sleep 1000`, loop, names[0], names[1], names[2], names[3])))
	if line := readLine(t, bufio.NewReader(p.Stdout()), p.Stdout()); line != "ready" {
		t.Fatalf("got %q", line)
	}
	missing := func() []string { return missingNamed(b.marker, names) }
	// The control: every lingerer is there before Stop.
	if !waitFor(goneTimeout, func() bool { return len(missing()) == 0 }) {
		t.Fatalf("lingering processes did not start: %v\n%s", missing(), joinProcs(marked(b.marker)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if _, err := p.Stop(ctx, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := b.sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	requireNoMarked(t, b.marker, "after Stop and Close")
}

// testForkLoop: a fork loop under Limits.Pids is held at the limit by the
// kernel, every process of the sandbox is inside the limiting cgroup, and
// the host still forks. The loop keeps trying after its forks are refused,
// and what is checked is what the kernel counted (pids.events, pids.peak),
// so the outcome does not depend on how fast the loop runs.
func testForkLoop(t *testing.T, s *suite) {
	if s.opts.NoPidsLimit {
		t.Skip("the provider cannot enforce SandboxLimits.Pids (Options.NoPidsLimit): fork-loop containment is not tested")
	}
	const limit = 40
	b := s.newBox(t, func(c *berth.SandboxConfig) { c.Limits.Pids = limit })
	p := b.start(t, b.shell(ForkLoop(b.bb)))
	if line := readLine(t, bufio.NewReader(p.Stdout()), p.Stdout()); line != "started" {
		t.Fatalf("got %q", line)
	}
	// The sandbox's limiting cgroup, found from its processes on the host.
	var dir string
	var lastErr error
	if !waitFor(goneTimeout, func() bool {
		for _, mp := range marked(b.marker) {
			if dir, lastErr = LimitingPidsCgroup(mp.pid); lastErr == nil {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no pids cgroup limits the sandbox's processes: %v\n%s", lastErr, joinProcs(marked(b.marker)))
	}
	// Wait until the kernel has refused a fork: the loop reached the limit.
	var c PidsCounts
	if !waitFor(runTimeout, func() bool { c, lastErr = ReadPids(dir); return lastErr == nil && c.Refused > 0 }) {
		t.Fatalf("the kernel refused no fork of the loop within %v (%+v, %v): the limit was never reached, so the check proves nothing", runTimeout, c, lastErr)
	}
	t.Logf("pids cgroup %s: max %d, peak %d, refused %d forks", dir, c.Max, c.Peak, c.Refused)
	if c.Max != limit {
		t.Errorf("the limiting cgroup %s has pids.max %d, want %d", dir, c.Max, limit)
	}
	if c.Peak > limit {
		t.Errorf("the kernel counted %d processes at once in %s, over the limit of %d", c.Peak, dir, limit)
	}
	// Every process of the sandbox is counted there: none escaped the limit.
	procs := marked(b.marker)
	for _, mp := range procs {
		// A process that exits meanwhile leaves its cgroup for the root
		// one before it is gone: only one still running after the read
		// (its command line still there) counts.
		if own, err := PidsCgroupOf(mp.pid); err == nil && !within(own, dir) && stillRunning(mp.pid) {
			t.Errorf("process %s of the sandbox is in pids cgroup %s, outside the limiting %s", mp, own, dir)
		}
	}
	if len(procs) > limit {
		t.Errorf("%d processes of the sandbox run at once, over the limit of %d", len(procs), limit)
	}
	// The host still forks and execs while the loop holds the limit (the
	// timeout only turns a hang into a failure).
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	if err := exec.CommandContext(ctx, HostBusybox, "true").Run(); err != nil {
		t.Errorf("the host cannot run a process during the fork loop: %v", err)
	}
	if _, err := p.Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	requireNoMarked(t, b.marker, "after Stop")
}
