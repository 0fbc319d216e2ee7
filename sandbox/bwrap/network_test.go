package bwrap

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// slirpsOf lists the host's slirp4netns processes started for session.
func slirpsOf(session string) []int {
	return sandboxtest.Pids(func(pid int) bool {
		return bytes.Contains(sandboxtest.ProcFile(pid, "environ"), []byte("BERTH_SESSION_ID="+session+"\x00")) &&
			bytes.Contains(sandboxtest.ProcFile(pid, "cmdline"), []byte("slirp4netns"))
	})
}

// gone reports whether pid is no process at all, not even a zombie.
func gone(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return os.IsNotExist(err)
}

// With network on, each process's slirp4netns runs in a process group of
// its own while the process runs, and is gone (reaped) once the process
// ends, and once the sandbox closes.
func TestNetworkSlirpLifecycle(t *testing.T) {
	if slirpPath() == "" {
		testenv.Missing(t, "slirp4netns", "not installed (Debian package slirp4netns)")
	}
	session := "ses_slirp_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sb, _ := open(t, func(c *berth.SandboxConfig) { c.Network = true; c.SessionID = session })
	for _, end := range []string{"stop", "close"} {
		p, err := sb.Start(context.Background(), berth.ProcSpec{Path: "/.berth/busybox", Args: []string{"sleep", "1000"},
			Stdin: strings.NewReader(""), Stdout: new(bytes.Buffer), Stderr: new(bytes.Buffer)})
		if err != nil {
			t.Fatal(err)
		}
		pids := slirpsOf(session)
		if len(pids) != 1 {
			t.Fatalf("%d slirp4netns processes for the sandbox's process, want 1", len(pids))
		}
		pid := pids[0]
		if pgid, err := unix.Getpgid(pid); err != nil || pgid != pid {
			t.Errorf("slirp4netns %d is in process group %d (%v), not its own", pid, pgid, err)
		}
		// It parses the agent's packets: confined by its own seccomp filter
		// and with no capability but NET_BIND_SERVICE (as root, or, for a
		// daemon that is not root, in the user namespace it acts from).
		var status string
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			status = string(b)
			if strings.Contains(status, "Seccomp:\t2") || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(status, "Seccomp:\t2") {
			t.Errorf("slirp4netns %d runs without a seccomp filter:\n%s", pid, status)
		}
		if !strings.Contains(status, "CapEff:\t0000000000000400") {
			t.Errorf("slirp4netns %d keeps capabilities beyond NET_BIND_SERVICE:\n%s", pid, status)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if end == "stop" {
			_, err = p.Stop(ctx, 0)
		} else {
			err = sb.Close(ctx)
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// Stop and Close return once the process is reaped, and its
		// slirp4netns with it.
		if !gone(pid) {
			t.Errorf("after %s, slirp4netns %d is still there", end, pid)
		}
	}
}

// Without slirp4netns, a sandbox with network is refused (the host's
// network is never shared instead); without network it opens.
func TestNetworkNeedsSlirp(t *testing.T) {
	p := New(Options{Slirp: "/nonexistent/slirp4netns"})
	cfg := berth.SandboxConfig{Workspace: t.TempDir(), Network: true}
	if _, err := p.Open(context.Background(), cfg); !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(berth.ErrorMessage(err), "slirp4netns") {
		t.Fatalf("Open with network = %v, want EUnavailable naming slirp4netns", err)
	}
	cfg.Network = false
	sb, err := p.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open without network: %v", err)
	}
	_ = sb.Close(context.Background())
}

// netnsHolder starts a process in a user and network namespace of its
// own, as the outer bwrap of a daemon that is not root is started, and
// pins it with a pidfd.
func netnsHolder(t *testing.T) (pid, pidfd int) {
	t.Helper()
	cmd := exec.Command(sandboxtest.HostBusybox, "sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ownNamespaces(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = unix.Close(fd)
	})
	return cmd.Process.Pid, fd
}

// slirp4netns runs on the outer bwrap's pid when the daemon made the
// namespaces. Should that pid name another process by then (reused), the
// namespace slirp4netns sets up is not the sandbox's: attach fails and
// bwrap is never released. The same call on the sandbox's own namespace
// is the control.
func TestNetworkOtherNamespaceRefused(t *testing.T) {
	if slirpPath() == "" {
		testenv.Missing(t, "slirp4netns", "not installed (Debian package slirp4netns)")
	}
	provider(t)
	for _, reused := range []bool{true, false} {
		init, pidfd := netnsHolder(t)
		outer := init
		if reused {
			outer, _ = netnsHolder(t)
		}
		blockR, blockW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		n := &userNet{path: slirpPath(), session: "ses_bwrap_reused", block: blockW, own: true}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = n.attach(ctx, time.Now().Add(30*time.Second), init, outer, pidfd)
		cancel()
		n.stop()
		released, _ := io.ReadAll(blockR)
		_ = blockR.Close()
		if reused {
			if err == nil || !strings.Contains(err.Error(), slirpGuestAddr+" is not up") || len(released) != 0 {
				t.Errorf("slirp4netns on another namespace: attach = %v, bwrap released %v; want a failure naming %s and no release", err, len(released) != 0, slirpGuestAddr)
			}
			continue
		}
		if err != nil || len(released) != 1 {
			t.Errorf("slirp4netns on the sandbox's namespace: attach = %v, bwrap released %v", err, len(released) == 1)
		}
	}
}

// A slirp4netns that fails says why in the start's error message, in its
// own words.
func TestNetworkFailureSaysWhy(t *testing.T) {
	provider(t)
	const words = "setegid(0): Operation not permitted"
	fake := fakeTool(t, "slirp4netns", "echo 'sent tapfd=9 for tap0' >&2; echo '"+words+"' >&2; exit 1")
	p := New(Options{Slirp: fake})
	sb, err := p.Open(context.Background(), berth.SandboxConfig{Workspace: t.TempDir(), Network: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	_, err = sb.Start(context.Background(), berth.ProcSpec{Path: "true", Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
	want := "bwrap: the sandbox did not start: slirp4netns failed: sent tapfd=9 for tap0; " + words
	if !berth.IsCode(err, berth.EUnavailable) || berth.ErrorMessage(err) != want {
		t.Errorf("Start = %v; want EUnavailable %q", err, want)
	}
}
