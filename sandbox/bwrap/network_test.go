package bwrap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// slirpsOf lists the host's slirp4netns processes started for session.
func slirpsOf(session string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(env, []byte("BERTH_SESSION_ID="+session+"\x00")) && bytes.Contains(cmd, []byte("slirp4netns")) {
			pids = append(pids, pid)
		}
	}
	return pids
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
		// and, as root, with no capability but NET_BIND_SERVICE.
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
		if os.Geteuid() == 0 && !strings.Contains(status, "CapEff:\t0000000000000400") {
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
