package docker

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/user"
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
)

func TestProbe(t *testing.T) {
	p := newProvider(t, Options{})
	if err := p.Probe(t.Context()); err != nil {
		t.Fatalf("Probe on a live engine: %v", err)
	}
	if p.Name() != berth.SandboxDocker {
		t.Errorf("Name = %q", p.Name())
	}
}

func TestProbeNoEngine(t *testing.T) {
	host := "unix://" + filepath.Join(t.TempDir(), "nothing.sock")
	p, err := New(Options{Host: host, ProbeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = p.Probe(ctx)
	if !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("Probe = %v, want unavailable", err)
	}
	msg := berth.ErrorMessage(err)
	if !strings.HasPrefix(msg, "docker: no engine at "+host+": ") || !strings.Contains(msg, "no such file") {
		t.Errorf("message = %q", msg)
	}
}

// An engine whose socket refuses this user (not in its group) is
// unavailable with the reason and the fix: the socket's group, named. (A
// socket's mode refuses no root: the refusal itself is tried by a user
// only; the hint is checked on the connect error either way.)
func TestProbeSocketRefused(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := listenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	group := strconv.Itoa(os.Getgid())
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	refused := &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}
	if hint := socketHint("unix://"+sock, refused); !strings.Contains(hint, "usermod -aG "+group+" USER") {
		t.Errorf("hint for a refused socket = %q, want the socket's group %s named", hint, group)
	}
	missing := &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ENOENT)}
	if hint := socketHint("unix://"+sock, missing); hint != "" {
		t.Errorf("hint for a missing socket = %q, want none", hint)
	}
	if hint := socketHint("tcp://127.0.0.1:2375", refused); hint != "" {
		t.Errorf("hint for a TCP engine = %q, want none", hint)
	}
	if os.Geteuid() == 0 {
		return
	}
	if err := os.Chmod(sock, 0); err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Host: "unix://" + sock, ProbeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.Probe(t.Context())
	if msg := berth.ErrorMessage(err); !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "usermod -aG "+group) {
		t.Errorf("Probe of a socket this user may not use = %v, want unavailable with the reason and the fix", err)
	}
}

func TestProbeTimeout(t *testing.T) {
	// A listener that accepts and never answers: the ping must give up.
	dir := t.TempDir()
	sock := filepath.Join(dir, "mute.sock")
	ln, err := listenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, err := New(Options{Host: "unix://" + sock, ProbeTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The caller's context never ends: only the probe's own 300 ms can end
	// the ping (the minute only turns a hang into a failure).
	done := make(chan error, 1)
	go func() { done <- p.Probe(context.Background()) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Probe did not give up on a mute engine")
	}
	if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(berth.ErrorMessage(err), "no answer within 300ms") {
		t.Fatalf("Probe = %v", err)
	}
}

func TestNewDefaults(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Host() != DefaultHost || p.opts.Image != DefaultImage || p.opts.UID != 1000 || p.opts.GID != 1000 || p.opts.HostUID != DefaultHostUID {
		t.Errorf("defaults: host %q image %q uid %d gid %d host uid %d", p.Host(), p.opts.Image, p.opts.UID, p.opts.GID, p.opts.HostUID)
	}
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
	q, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Host() != "tcp://127.0.0.1:1" {
		t.Errorf("host from DOCKER_HOST = %q", q.Host())
	}
	if _, err := New(Options{Host: "not-a-url"}); !berth.IsCode(err, berth.EInvalid) {
		t.Errorf("bad host: %v", err)
	}
}

func TestImageAutoBuild(t *testing.T) {
	image := "berth-sandbox:build-" + randomHex(4)
	p := newProvider(t, Options{Image: image})
	if p.helper() == "" {
		t.Fatal("no static busybox on this host (apt-get install busybox-static)")
	}
	ctx := t.Context()
	t.Cleanup(func() { removeImage(context.Background(), p, image) })
	if _, err := p.cli.ImageInspect(ctx, image); !cerrdefs.IsNotFound(err) {
		t.Fatalf("image exists before the test: %v", err)
	}
	sb := openSandbox(t, p, berth.SandboxConfig{})
	if _, err := p.cli.ImageInspect(ctx, image); err != nil {
		t.Fatalf("image not built: %v", err)
	}
	// Its userland is busybox: a shell and the usual tools, by name; its
	// passwd names the user the processes run as.
	res := run(t, sb, nil, "sh", "-c", "ls /bin/sh >/dev/null && id -un && id -u")
	if want := fmt.Sprintf("berth\n%d\n", sb.who.uid); res.status.Code != 0 || res.stdout != want {
		t.Fatalf("in the built image: %+v", res)
	}
	// A second provider finds it and does not build again.
	q := newProvider(t, Options{Image: image})
	ensureTestImage(t, q)
}

func TestImageMissing(t *testing.T) {
	p := newProvider(t, Options{})
	ws, home := testDirs(t)
	_, err := p.Open(t.Context(), berth.SandboxConfig{SessionID: "s", Workspace: ws, Home: home, Image: "no-such/image:never"})
	if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(berth.ErrorMessage(err), `"no-such/image:never"`) {
		t.Fatalf("Open with a missing image = %v", err)
	}
}

func TestDefaultImageWithoutBusybox(t *testing.T) {
	image := "berth-sandbox:none-" + randomHex(4)
	p := newProvider(t, Options{Image: image})
	p.helper = func() string { return "" }
	ws, home := testDirs(t)
	_, err := p.Open(t.Context(), berth.SandboxConfig{SessionID: "s", Workspace: ws, Home: home})
	if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(berth.ErrorMessage(err), "busybox-static") {
		t.Fatalf("Open = %v", err)
	}
}

func TestOpenBadConfig(t *testing.T) {
	p, err := New(Options{Host: "unix:///nonexistent.sock"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ws := t.TempDir()
	file := filepath.Join(ws, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]berth.SandboxConfig{
		"relative workspace": {Workspace: "ws"},
		"missing workspace":  {Workspace: filepath.Join(ws, "nope")},
		"file workspace":     {Workspace: file},
		"missing home":       {Workspace: ws, Home: filepath.Join(ws, "nope")},
		"relative bind":      {Workspace: ws, Binds: []berth.Bind{{Source: "x", Target: "/x"}}},
		"missing bind":       {Workspace: ws, Binds: []berth.Bind{{Source: filepath.Join(ws, "nope"), Target: "/x"}}},
		"bad env":            {Workspace: ws, Env: map[string]string{"A=B": "c"}},
	} {
		_, err := p.Open(t.Context(), cfg)
		if !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("%s: Open = %v, want invalid_argument", name, err)
		}
		if strings.Contains(berth.ErrorMessage(err), ws) {
			t.Errorf("%s: message shows a host path: %q", name, berth.ErrorMessage(err))
		}
	}
}

func TestRemoveLeftovers(t *testing.T) {
	instance := "leftovers-" + randomHex(4)
	p := newProvider(t, Options{Instance: instance})
	other := newProvider(t, Options{Instance: "other-" + randomHex(4)})
	a := openSandbox(t, p, berth.SandboxConfig{})
	b := openSandbox(t, p, berth.SandboxConfig{})
	keep := openSandbox(t, other, berth.SandboxConfig{})
	ctx := t.Context()
	n, err := p.RemoveLeftovers(ctx, nil)
	if err != nil || n != 2 {
		t.Fatalf("RemoveLeftovers = %d, %v; want 2", n, err)
	}
	for _, sb := range []*Sandbox{a, b} {
		if _, err := p.cli.ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("container %.12s still there: %v", sb.ID(), err)
		}
	}
	if _, err := p.cli.ContainerInspect(ctx, keep.ID(), client.ContainerInspectOptions{}); err != nil {
		t.Errorf("another instance's container was touched: %v", err)
	}
	if n, err := p.RemoveLeftovers(ctx, nil); err != nil || n != 0 {
		t.Errorf("second RemoveLeftovers = %d, %v", n, err)
	}
	// Closing a sandbox whose container is gone is fine.
	if err := a.Close(ctx); err != nil {
		t.Errorf("Close after removal: %v", err)
	}
}

func TestContainerShape(t *testing.T) {
	p := newProvider(t, Options{Limits: berth.SandboxLimits{MemoryBytes: 256 << 20}})
	sb := openSandbox(t, p, berth.SandboxConfig{SessionID: "ses_shape", Limits: berth.SandboxLimits{Pids: 77, NanoCPUs: 5e8, OpenFiles: 321, TmpBytes: 256 << 20}})
	info, err := p.cli.ContainerInspect(t.Context(), sb.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := info.Container
	hc := c.HostConfig
	if c.Config.Labels[LabelSession] != "ses_shape" || c.Config.Labels[LabelManaged] != "true" || c.Config.Labels[LabelInstance] != testInstance {
		t.Errorf("labels = %v", c.Config.Labels)
	}
	if !hc.ReadonlyRootfs || string(hc.NetworkMode) != "none" || len(hc.CapDrop) != 1 || hc.CapDrop[0] != "ALL" {
		t.Errorf("rootfs ro %v, network %q, capdrop %v", hc.ReadonlyRootfs, hc.NetworkMode, hc.CapDrop)
	}
	if !strings.Contains(strings.Join(hc.SecurityOpt, ","), "no-new-privileges") {
		t.Errorf("security opts = %v", hc.SecurityOpt)
	}
	if hc.Memory != 256<<20 || hc.NanoCPUs != 5e8 || hc.PidsLimit == nil || *hc.PidsLimit != 77 {
		t.Errorf("memory %d, cpus %d, pids %v", hc.Memory, hc.NanoCPUs, hc.PidsLimit)
	}
	// /tmp is capped at TmpBytes and swap adds nothing to the memory
	// limit.
	if got := hc.Tmpfs["/tmp"]; !strings.Contains(got, ",size=268435456") || hc.MemorySwap != hc.Memory {
		t.Errorf("tmpfs /tmp %q, memory swap %d", got, hc.MemorySwap)
	}
	if len(hc.Ulimits) != 1 || hc.Ulimits[0].Name != "nofile" || hc.Ulimits[0].Hard != 321 {
		t.Errorf("ulimits = %v", hc.Ulimits)
	}
	if c.Config.User != sb.who.user() || c.Config.WorkingDir != "/" {
		t.Errorf("user %q, workdir %q", c.Config.User, c.Config.WorkingDir)
	}
	res := run(t, sb, nil, "sh", "-c", "ulimit -n; cat /proc/self/status | grep -E '^Cap(Eff|Prm|Bnd)'; grep NoNewPrivs /proc/self/status")
	want := "321\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"
	if res.stdout != want {
		t.Errorf("inside:\n%s\nwant:\n%s", res.stdout, want)
	}
}

// muteListener accepts connections on a unix socket and never answers.
type muteListener struct {
	ln   net.Listener
	done chan struct{}
}

// listenUnix starts a muteListener on sock.
func listenUnix(sock string) (*muteListener, error) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	m := &muteListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		var conns []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	return m, nil
}

// Close stops the listener and closes what it accepted.
func (m *muteListener) Close() error {
	err := m.ln.Close()
	<-m.done
	return err
}

func TestOtherImage(t *testing.T) {
	// An image of the user's, with an entrypoint that would end the
	// container at once: the provider's init replaces it.
	p := newProvider(t, Options{})
	image := "berth-test-agent:" + randomHex(4)
	buildImage(t, p, image, "FROM "+p.opts.Image+"\nENTRYPOINT [\"/bin/false\"]\nENV AGENT_IMAGE=yes\n")
	sb := openSandbox(t, p, berth.SandboxConfig{Image: image})
	if r := run(t, sb, nil, "sh", "-c", `echo "$AGENT_IMAGE"`); r.stdout != "yes\n" {
		t.Fatalf("in the user's image: %+v", r)
	}
}

// A root daemon's Open refuses a workspace people share on the directory
// it pinned, before the engine is asked for anything and before anything
// changes hands: a sticky one (root's file in it stays root's), or one of
// two users that are not berth's own (WorkspaceOwners names those).
func TestOpenRefusesASharedWorkspace(t *testing.T) {
	testenv.NeedRoot(t, "only a root daemon gives files away")
	p, err := New(Options{Host: "unix:///nonexistent.sock"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ws := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(ws, "secret")
	if err := os.WriteFile(secret, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ws, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Open(t.Context(), berth.SandboxConfig{Workspace: ws}); !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "sticky") {
		t.Errorf("Open of a sticky workspace: %v, want invalid_argument saying why", err)
	}
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, uid := range []int{4343, 4444} {
		f := filepath.Join(ws, "f"+strconv.Itoa(i))
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Open(t.Context(), berth.SandboxConfig{Workspace: ws}); !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "several other users") {
		t.Errorf("Open of a workspace of two other users: %v, want invalid_argument saying why", err)
	}
	// With the second user berth's own the check passes, and Open goes on
	// to the engine (here none: unavailable).
	if _, err := p.Open(t.Context(), berth.SandboxConfig{Workspace: ws, WorkspaceOwners: []int{4444}}); berth.IsCode(err, berth.EInvalid) {
		t.Errorf("Open with the second user berth's own: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(secret, &st); err != nil || st.Uid != 0 {
		t.Errorf("root's file in the refused workspace: uid %d (%v)", st.Uid, err)
	}
}

func TestContainerNameKeepsOnlyWhatDockerTakes(t *testing.T) {
	for session, want := range map[string]string{
		"ses_01ABC": "ses_01ABC", "a.b-c_d": "a.b-c_d", "a/b c": "a_b_c", "é!": "__", "x\xffy": "x_y",
	} {
		if got := nameSafe(session); got != want {
			t.Errorf("nameSafe(%q) = %q, want %q", session, got, want)
		}
	}
	if name := containerName(strings.Repeat("s", 80)); !strings.HasPrefix(name, "berth-"+strings.Repeat("s", 64)+"-") {
		t.Errorf("containerName of a long session: %q", name)
	}
}
