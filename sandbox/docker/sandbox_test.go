package docker

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

func TestEnv(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{Env: map[string]string{"FOO": "bar", "HOME": "/elsewhere", "PATH": "/usr/local/bin:/bin"}})
	ctx := t.Context()
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: "sh", Args: []string{"-c", `echo "$FOO $BAZ $HOME $PATH"; pwd`}, Env: []string{"BAZ=qux", "FOO=over"}})
	if err != nil {
		t.Fatal(err)
	}
	res := collect(t, proc)
	want := fmt.Sprintf("over qux %s /usr/local/bin:/bin\n%s\n", sb.cfg.Home, sb.cfg.Workspace)
	if res.stdout != want || res.status.Code != 0 {
		t.Fatalf("got %+v, want stdout %q", res, want)
	}
	if _, err := sb.Start(ctx, berth.ProcSpec{Path: "true", Env: []string{"NOEQUALS"}}); !berth.IsCode(err, berth.EInvalid) {
		t.Errorf("bad env entry: %v", err)
	}
	if _, err := sb.Start(ctx, berth.ProcSpec{}); !berth.IsCode(err, berth.EInvalid) {
		t.Errorf("no path: %v", err)
	}
}

func TestWorkspaceAndHome(t *testing.T) {
	p := newProvider(t, Options{})
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "secret"), []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rw, 0o777); err != nil {
		t.Fatal(err)
	}
	sb := openSandbox(t, p, berth.SandboxConfig{Binds: []berth.Bind{
		{Source: ro, Target: "/opt/ro"},
		{Source: rw, Target: "/opt/rw", Writable: true},
	}})
	ws, home := sb.cfg.Workspace, sb.cfg.Home
	res := run(t, sb, nil, "sh", "-c", `echo data > out.txt && mkdir -p sub && echo h > "$HOME/.agentrc" && cat /opt/ro/secret && echo w > /opt/rw/f && ! touch /opt/ro/x 2>/dev/null && echo ok`)
	if res.status.Code != 0 || res.stdout != "s3cret"+"ok\n" {
		t.Fatalf("%+v", res)
	}
	b, err := os.ReadFile(filepath.Join(ws, "out.txt"))
	if err != nil || string(b) != "data\n" {
		t.Fatalf("workspace file on the host: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(ws, "out.txt")); err == nil {
		if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != sb.who.hostUID {
			t.Errorf("file owned by %d on the host, want %d", uid, sb.who.hostUID)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, ".agentrc")); err != nil || string(b) != "h\n" {
		t.Errorf("home file on the host: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "f")); err != nil || string(b) != "w\n" {
		t.Errorf("writable bind on the host: %q, %v", b, err)
	}
	// Dir: relative to the workspace, or absolute.
	proc, err := sb.Start(t.Context(), berth.ProcSpec{Path: "pwd", Dir: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	if res := collect(t, proc); res.stdout != filepath.Join(ws, "sub")+"\n" {
		t.Errorf("pwd in sub = %q", res.stdout)
	}
}

func TestHomeChownedWhenRoot(t *testing.T) {
	testenv.NeedRoot(t, "only root chowns the home")
	p := newProvider(t, Options{})
	ws, _ := testDirs(t)
	home := t.TempDir() // root's, 0700
	if err := os.WriteFile(filepath.Join(home, "cfg"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb := openSandbox(t, p, berth.SandboxConfig{Workspace: ws, Home: home})
	res := run(t, sb, nil, "sh", "-c", `cat "$HOME/cfg" && touch "$HOME/new" && echo ok`)
	if res.stdout != "xok\n" {
		t.Fatalf("%+v", res)
	}
}

func TestReadOnlyRoot(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	res := run(t, sb, nil, "sh", "-c", "echo x > /etc/x")
	if res.status.Code == 0 || !strings.Contains(res.stderr, "Read-only file system") {
		t.Fatalf("writing /etc/x: %+v", res)
	}
	res = run(t, sb, nil, "sh", "-c", "echo x > /tmp/x && cat /tmp/x")
	if res.status.Code != 0 || res.stdout != "x\n" {
		t.Fatalf("writing /tmp/x: %+v", res)
	}
}

func TestNetworkNone(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	// A listener on every host address: from the sandbox, neither the
	// host's loopback nor its other addresses reach it.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	accepted := make(chan struct{}, 16)
	testenv.Serve(t, ln, func(net.Conn) { accepted <- struct{}{} })
	targets := []string{"127.0.0.1"}
	if ip := hostAddress(); ip != "" {
		targets = append(targets, ip)
	}
	// The control: the same client reaches the listener from the host.
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	<-accepted
	for _, ip := range targets {
		res := run(t, sb, nil, "sh", "-c", fmt.Sprintf("nc -w 2 %s %d </dev/null; echo rc=$?", ip, port))
		if !strings.Contains(res.stdout, "rc=1") {
			t.Errorf("nc to %s:%d from the sandbox: %+v", ip, port, res)
		}
	}
	res := run(t, sb, nil, "sh", "-c", "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
	if res.stdout != "lo\n" {
		t.Errorf("interfaces = %q, want only lo", res.stdout)
	}
	select {
	case <-accepted:
		t.Error("the sandbox reached the host's listener")
	default:
	}
}

// hostAddress is one non-loopback IPv4 address of this host, or "".
func hostAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// TestPidsLimit: a fork loop that keeps trying is held at the limit by the
// container's pids cgroup (what the kernel counted, not a sample of /proc
// taken at some moment), the engine still answers, and Stop ends it all.
func TestPidsLimit(t *testing.T) {
	p := newProvider(t, Options{})
	const limit = 48
	sb := openSandbox(t, p, berth.SandboxConfig{Limits: berth.SandboxLimits{Pids: limit}})
	if !sb.local {
		testenv.Missing(t, "a local Docker engine", "the engine's processes are not visible from this host: its cgroups cannot be read")
	}
	ctx := t.Context()
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: "sh", Args: []string{"-c", sandboxtest.ForkLoop("/bin/busybox")}})
	if err != nil {
		t.Fatal(err)
	}
	go drain(proc.Stderr())
	out := bufio.NewReader(proc.Stdout())
	if line, err := out.ReadString('\n'); line != "started\n" {
		t.Fatalf("got %q, %v", line, err)
	}
	go drain(out)
	dir, err := sandboxtest.LimitingPidsCgroup(proc.Pid())
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the kernel has refused a fork: the loop reached the limit.
	var c sandboxtest.PidsCounts
	deadline := time.Now().Add(time.Minute)
	for c, err = sandboxtest.ReadPids(dir); err == nil && c.Refused == 0; c, err = sandboxtest.ReadPids(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("the kernel refused no fork of the loop within a minute: %+v", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pids cgroup %s: max %d, peak %d, refused %d forks", dir, c.Max, c.Peak, c.Refused)
	if c.Max != limit || c.Peak > limit {
		t.Errorf("pids cgroup %s: max %d, peak %d; want max %d and a peak within it", dir, c.Max, c.Peak, limit)
	}
	// Every process of the loop is counted there.
	for _, pid := range groupPids(proc.Pid()) {
		// The loop's processes die and their pids are reused fast: a pid
		// counts only if it is the same process of the loop's group
		// before and after its cgroup is read (another test's process
		// may have its pid by the time it is looked at), and not yet
		// exiting then (an exiting process may be shown in the root
		// cgroup; the kernel never clears PF_EXITING once set).
		before := procStat(pid)
		own, err := sandboxtest.PidsCgroupOf(pid)
		if err != nil || !strings.HasPrefix(before, strconv.Itoa(proc.Pid())+" ") || procStat(pid) != before || exiting(pid) {
			continue
		}
		if own != dir && !strings.HasPrefix(own, dir+"/") {
			t.Errorf("process %d of the loop is in pids cgroup %s, outside the limiting %s", pid, own, dir)
		}
	}
	// The engine still answers during the fork loop.
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Probe(pctx); err != nil {
		t.Fatalf("Probe during the fork loop: %v", err)
	}
	st, err := proc.Stop(ctx, time.Second)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st.Success() {
		t.Errorf("status after Stop = %+v", st)
	}
	waitGroupGone(t, proc.Pid())
	// With the loop gone, the sandbox works again.
	if res := run(t, sb, nil, "echo", "back"); res.stdout != "back\n" {
		t.Errorf("after the loop: %+v", res)
	}
}

// groupSize counts this host's live processes in process group pgid (a
// zombie is dead: the container's init reaps it on its next round).
func groupSize(pgid int) int { return len(groupPids(pgid)) }

// procStat is process pid's identity: its process group and start time
// ("" once it is gone), which a reused pid does not share.
func procStat(pid int) string {
	f := sandboxtest.Stat(pid)
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime: pgrp is f[2], starttime f[19].
	if len(f) < 20 {
		return ""
	}
	return f[2] + " " + f[19]
}

// pfExiting is the kernel's PF_EXITING task flag (include/linux/sched.h).
const pfExiting = 0x4

// exiting reports whether process pid has begun to exit or is gone.
func exiting(pid int) bool {
	f := sandboxtest.Stat(pid)
	// state ppid pgrp session tty_nr tpgid flags: flags is f[6].
	if len(f) < 7 || f[0] == "Z" || f[0] == "X" {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err != nil || flags&pfExiting != 0
}

// groupPids lists this host's live processes in process group pgid.
func groupPids(pgid int) []int {
	return sandboxtest.Pids(func(pid int) bool {
		f := sandboxtest.Stat(pid)
		return len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z"
	})
}

func TestCloseRemovesContainer(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	ctx := t.Context()
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: "sleep", Args: []string{"1000"}})
	if err != nil {
		t.Fatal(err)
	}
	go drain(proc.Stdout())
	go drain(proc.Stderr())
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := p.cli.ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("container still there after Close: %v", err)
	}
	st, err := proc.Wait()
	if err != nil || st.Signal != "SIGKILL" {
		t.Errorf("process after Close: %+v, %v", st, err)
	}
	waitGroupGone(t, proc.Pid())
	if _, err := sb.Start(ctx, berth.ProcSpec{Path: "true"}); !berth.IsCode(err, berth.EUnavailable) {
		t.Errorf("Start after Close: %v", err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := os.Stat(sb.cfg.Workspace); err != nil {
		t.Errorf("Close touched the workspace: %v", err)
	}
}

func TestDemoAgent(t *testing.T) {
	needEngine(t)
	// A static berth: the one cmd/berth's tests built ahead
	// (BERTH_TEST_BINARIES, for a user without Go), else built now.
	bin := filepath.Join(os.Getenv("BERTH_TEST_BINARIES"), "berth")
	if os.Getenv("BERTH_TEST_BINARIES") == "" {
		bin = filepath.Join(t.TempDir(), "berth")
		build := exec.Command("go", "build", "-o", bin, "github.com/berth-sh/berth/cmd/berth")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building a static berth: %v\n%s", err, out)
		}
	}
	p := newProvider(t, Options{Berth: bin})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: "berth", Args: []string{"agent-demo"}})
	if err != nil {
		t.Fatal(err)
	}
	go drain(proc.Stderr())
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n"
	if _, err := proc.Stdin().Write([]byte(init)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(proc.Stdout()).ReadString('\n')
	if err != nil || !strings.Contains(line, `"protocolVersion":1`) || !strings.Contains(line, `"id":1`) {
		t.Fatalf("answer to initialize: %q, %v", line, err)
	}
	_ = proc.Stdin().Close()
	st, err := proc.Stop(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("demo agent ended: %+v", st)
}

// F1 under docker: a symbolic link planted at the workspace's path (by
// the sandbox owning the directory above it) is refused at Open, before
// any chown or bind; the link's target keeps its owner.
func TestWorkspaceSwappedForALinkIsRefused(t *testing.T) {
	p := newProvider(t, Options{})
	wsA, home := testDirs(t)
	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "secret"), []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(wsA, "sub")
	if err := os.Symlink(victim, ws); err != nil {
		t.Fatal(err)
	}
	sb, err := p.Open(t.Context(), berth.SandboxConfig{SessionID: "ses_" + randomHex(6), Workspace: ws, Home: home})
	if err == nil {
		_ = sb.Close(context.Background())
		t.Fatal("Open followed the link planted at the workspace's path")
	}
	if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Open: %v, want invalid_argument naming the link", err)
	}
	for _, path := range []string{victim, filepath.Join(victim, "secret")} {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != uint32(os.Geteuid()) {
			t.Errorf("%s now belongs to %d", path, st.Uid)
		}
	}
}

// Reopen hands the daemon the session's running container, whose
// processes run as the provider's user; not another session's, nor one
// that runs as another user (made before, by a berth that ran them as uid
// 1000): its files are not this user's.
func TestReopen(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	again, err := p.Reopen(t.Context(), sb.cfg, sb.Ref())
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, again, nil, "sh", "-c", "id -u && echo x > reopened"); res.stdout != strconv.Itoa(sb.who.uid)+"\n" {
		t.Fatalf("in the reopened sandbox: %+v", res)
	}
	other := sb.cfg
	other.SessionID = "ses_other"
	if _, err := p.Reopen(t.Context(), other, sb.Ref()); !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("Reopen for another session: %v", err)
	}
	q := newProvider(t, Options{})
	q.who = &identity{uid: 77001, gid: 77001, hostUID: 77001, hostGID: 77001}
	if _, err := q.Reopen(t.Context(), sb.cfg, sb.Ref()); !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(err.Error(), "runs as "+sb.who.user()+", not 77001:77001") {
		t.Errorf("Reopen as another user: %v", err)
	}
}

// A path a user may not look into for a moment (a container's first
// process before runc has exec'd its program) is waited for, not taken
// for another directory. (Root is refused nothing: for it there is no
// wait, and the test shows only that.)
func TestAwaitLookable(t *testing.T) {
	locked := filepath.Join(t.TempDir(), "locked")
	inside := filepath.Join(locked, "ws")
	if err := os.MkdirAll(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan time.Time, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = os.Chmod(locked, 0o755)
		unlocked <- time.Now()
	}()
	awaitLookable(t.Context(), inside)
	returned := time.Now()
	at := <-unlocked
	if os.Geteuid() != 0 && returned.Before(at) {
		t.Errorf("awaitLookable returned %s before the path could be looked into", at.Sub(returned))
	}
	if _, err := os.Stat(inside); err != nil {
		t.Error(err)
	}
}
