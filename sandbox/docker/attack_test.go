package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// attackEnv, when set, makes the test binary the attacker of
// TestOtherUsersAreHeldOut: TestMain runs the probes it holds (JSON) and
// prints what each got (JSON) instead of running the tests.
const attackEnv = "BERTH_DOCKER_TEST_ATTACK"

// probe is one thing the attacker tries.
type probe struct {
	// Name says what is tried, for the test's messages.
	Name string
	// Kind is read, list, write, connect, environ, ptrace, vmread or
	// signal.
	Kind string
	// Path is what read, list, write and connect try.
	Path string
	// Pid is the process environ, ptrace, vmread and signal try.
	Pid int
	// Secret is what environ must find for a success.
	Secret string
	// Proc is set when the probe goes through /proc/<pid>: a Linux
	// security module (AppArmor's docker-default) may refuse it to a user
	// whom file modes allow.
	Proc bool
}

// attack runs the probes of spec and prints, as JSON, "ok" or "denied: "
// and the error by probe name. It is the whole helper process.
func attack(spec string) int {
	var probes []probe
	if err := json.Unmarshal([]byte(spec), &probes); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out := map[string]string{}
	for _, pr := range probes {
		if err := pr.try(); err != nil {
			out[pr.Name] = "denied: " + err.Error()
		} else {
			out[pr.Name] = "ok"
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 2
	}
	return 0
}

// try is the probe: nil when it got what it tried for.
func (pr probe) try() error {
	switch pr.Kind {
	case "read":
		_, err := os.ReadFile(pr.Path)
		return err
	case "list":
		_, err := os.ReadDir(pr.Path)
		return err
	case "write":
		f, err := os.OpenFile(pr.Path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString("\n# the attacker was here\n")
		return errors.Join(err, f.Close())
	case "connect":
		c, err := net.Dial("unix", pr.Path)
		if err != nil {
			return err
		}
		return c.Close()
	case "environ":
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pr.Pid))
		if err == nil && !bytes.Contains(b, []byte(pr.Secret)) {
			err = errors.New("read, but without the secret")
		}
		return err
	case "ptrace":
		return ptraceAttach(pr.Pid)
	case "vmread":
		buf := make([]byte, 1)
		local := []unix.Iovec{{Base: &buf[0]}}
		local[0].SetLen(1)
		// Address 0 is never mapped: EFAULT means the kernel let us in.
		_, err := unix.ProcessVMReadv(pr.Pid, local, []unix.RemoteIovec{{Base: 0, Len: 1}}, 0)
		if errors.Is(err, unix.EFAULT) {
			return nil
		}
		return err
	case "signal":
		return syscall.Kill(pr.Pid, 0)
	}
	return fmt.Errorf("unknown probe kind %q", pr.Kind)
}

// ptraceAttach attaches to pid, waits for it to stop and detaches.
func ptraceAttach(pid int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := syscall.PtraceAttach(pid); err != nil {
		return err
	}
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(pid, &ws, syscall.WALL, nil)
	return errors.Join(err, syscall.PtraceDetach(pid))
}

// The attack of a local user on a root daemon's docker session: under
// docker the agent ran as uid 1000 on the host too, a real login account
// on most machines, which then reached through /proc/<agent>/root the
// workspace, the session's HOME and its credentials, the berth MCP
// socket; read the agent's environment, ptraced it, and wrote the
// user-given workspace's files that were root's (build.sh, .git/config:
// core.fsmonitor runs at root's next git). As that user (uid 1000, made
// when the host has none), every way fails now; the control shows each
// works against a sandbox that runs as that user, as it did.
func TestOtherUsersAreHeldOut(t *testing.T) {
	testenv.NeedRoot(t, "acting as another local user")
	needEngine(t)
	uid, gid := loginUser(t, 1000)
	t.Run("host_uid", func(t *testing.T) {
		p := newProvider(t, Options{})
		for name, got := range attackProbes(t, p, uid, gid).got {
			if got == "ok" {
				t.Errorf("as uid %d, %s: it worked", uid, name)
			}
		}
	})
	t.Run("control", func(t *testing.T) {
		// The sandbox as uid 1000 on the host, as before: the attack works.
		image := testImage + "-uid" + strconv.Itoa(uid)
		p := newProvider(t, Options{HostUID: uid, Image: image})
		t.Cleanup(func() { removeImage(context.Background(), p, image) })
		lsm := engineLSM(t, p)
		probes := attackProbes(t, p, uid, gid)
		for _, pr := range probes.list {
			got := probes.got[pr.Name]
			switch {
			case got == "ok":
			case pr.Proc && lsm != "":
				t.Logf("%s: %s (the engine's %s confines its containers)", pr.Name, got, lsm)
			default:
				t.Errorf("as uid %d against a sandbox of its own uid, %s: %s", uid, pr.Name, got)
			}
		}
	})
}

// attackResults are the probes an attacker tried and what each got.
type attackResults struct {
	list []probe
	got  map[string]string
}

// attackProbes lays out a session as a root daemon does — a user-given
// workspace holding root's files in a directory anyone may cross; under
// the daemon's 0700 home the session's HOME with a credential and the
// berth MCP socket's directory, given to the sandbox's owner as
// session.giveTools does (docs/api.md, "Transport") and bound at
// /run/berth-mcp; a secret in the agent's environment — starts the agent
// and runs the probes as uid:gid.
func attackProbes(t *testing.T, p *Provider, uid, gid int) attackResults {
	t.Helper()
	id := "ses_" + randomHex(6)
	proj := sandboxtest.WorldDir(t)
	ws := filepath.Join(proj, "project")
	files := map[string]os.FileMode{"build.sh": 0o755, ".git/config": 0o644, "secret.txt": 0o600}
	for name, mode := range files {
		path := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("root's "+name+"\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	berthHome := t.TempDir()
	home := filepath.Join(berthHome, "homes", id)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".credentials.json"), []byte(`{"token":"sk-live"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	mcpDir := filepath.Join(berthHome, "run", "mcp-"+id)
	if err := os.MkdirAll(mcpDir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(mcpDir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	giveToolsLike(t, p, mcpDir)
	secret := "berth-mcp-credential-" + randomHex(8)
	sb := openSandbox(t, p, berth.SandboxConfig{
		SessionID: id, Workspace: ws, Home: home,
		Env:   map[string]string{"BERTH_MCP_TOKEN": secret},
		Binds: []berth.Bind{{Source: mcpDir, Target: "/run/berth-mcp"}},
	})
	agent, err := sb.Start(t.Context(), berth.ProcSpec{Path: "sh", Args: []string{"-c", "exec sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = agent.Stop(context.Background(), 0) })
	go drain(agent.Stdout())
	go drain(agent.Stderr())
	pid := agent.Pid()
	root := fmt.Sprintf("/proc/%d/root", pid)
	probes := []probe{
		{Name: "write the workspace's build.sh", Kind: "write", Path: filepath.Join(ws, "build.sh")},
		{Name: "write the workspace's .git/config", Kind: "write", Path: filepath.Join(ws, ".git/config")},
		{Name: "read the workspace's root-only secret.txt", Kind: "read", Path: filepath.Join(ws, "secret.txt")},
		{Name: "read secret.txt through /proc/<agent>/root", Kind: "read", Path: root + filepath.Join(ws, "secret.txt"), Proc: true},
		{Name: "list the workspace through /proc/<agent>/cwd", Kind: "list", Path: fmt.Sprintf("/proc/%d/cwd", pid), Proc: true},
		{Name: "list the HOME through /proc/<agent>/root", Kind: "list", Path: root + home, Proc: true},
		{Name: "read the HOME's credentials through /proc/<agent>/root", Kind: "read", Path: root + filepath.Join(home, ".credentials.json"), Proc: true},
		{Name: "connect to the berth MCP socket through /proc/<agent>/root", Kind: "connect", Path: root + "/run/berth-mcp/s", Proc: true},
		{Name: "read the agent's environment", Kind: "environ", Pid: pid, Secret: secret, Proc: true},
		{Name: "ptrace the agent", Kind: "ptrace", Pid: pid, Proc: true},
		{Name: "read the agent's memory (process_vm_readv)", Kind: "vmread", Pid: pid, Proc: true},
		{Name: "signal the agent", Kind: "signal", Pid: pid},
	}
	spec, err := json.Marshal(probes)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runAs(t, uid, gid, []string{attackEnv + "=" + string(spec)})
	if err != nil {
		t.Fatalf("the attacker: %v", err)
	}
	got := map[string]string{}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != len(probes) {
		t.Fatalf("the attacker printed %q: %v", out, err)
	}
	for _, pr := range probes {
		t.Logf("as uid %d, %s: %s", uid, pr.Name, got[pr.Name])
	}
	return attackResults{list: probes, got: got}
}

// giveToolsLike sets the owner and modes of a berth MCP socket's
// directory as session.giveTools does: the sandbox's owner's alone (0500,
// the socket 0600) when the provider gives files away.
func giveToolsLike(t *testing.T, p *Provider, dir string) {
	t.Helper()
	sock := filepath.Join(dir, "s")
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	uid, gid, ok := p.FileOwner()
	if !ok {
		return
	}
	for _, path := range []string{sock, dir} {
		if err := os.Lchown(path, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
}

// engineLSM names the security module the engine confines containers
// with (apparmor, selinux), "" when none.
func engineLSM(t *testing.T, p *Provider) string {
	t.Helper()
	res, err := p.cli.Info(t.Context(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Info.SecurityOptions {
		for _, lsm := range []string{"apparmor", "selinux"} {
			if strings.Contains(o, "name="+lsm) {
				return lsm
			}
		}
	}
	return ""
}
