package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Under a service manager (NOTIFY_SOCKET set, systemd's Type=notify) the
// daemon says READY=1 only once its API answers and STOPPING=1 when a
// SIGTERM starts its shutdown; the socket does not reach its shims.
func TestServeNotifiesTheServiceManager(t *testing.T) {
	home := t.TempDir()
	sock := filepath.Join(t.TempDir(), "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	messages := make(chan string, 8)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ln.Read(buf)
			if err != nil {
				close(messages)
				return
			}
			messages <- string(buf[:n])
		}
	}()
	s := startServerEnv(t, home, []string{"NOTIFY_SOCKET=" + sock})
	ready := next(t, messages)
	if !strings.Contains(ready, "READY=1") {
		t.Fatalf("first message %q, want READY=1", ready)
	}
	if st, err := s.api("GET", "/v1/health", nil, nil); st != 200 {
		t.Fatalf("health after READY: %d %v", st, err)
	}
	// A session's shim does not inherit the socket.
	sess := s.busySessionWith(t, nil, "sleep 60000")
	for _, pid := range append(shimsOf(home), agentPIDs(sess.ID)...) {
		if env := environOf(t, pid); strings.Contains(env, "NOTIFY_SOCKET") {
			t.Errorf("process %d inherited NOTIFY_SOCKET", pid)
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := next(t, messages); !strings.Contains(got, "STOPPING=1") {
		t.Fatalf("message after SIGTERM %q, want STOPPING=1", got)
	}
}

// next waits for the next notify message.
func next(t *testing.T, messages <-chan string) string {
	t.Helper()
	select {
	case m, ok := <-messages:
		if !ok {
			t.Fatal("the notify socket closed")
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no notify message within 30 s")
	}
	return ""
}

// `berth --version` prints the version and exits 0; --help lists the exit codes.
func TestVersionAndExitCodesInHelp(t *testing.T) {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "berth ") {
		t.Fatalf("berth --version: %v %q", err, out)
	}
	out, err = exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Exit codes: 0 ok, 1 failure, 2 usage error, 3 not found, 4 conflict") {
		t.Fatalf("berth --help: %v\n%s", err, out)
	}
}

// environOf is a process's environment, NUL-separated.
func environOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The systemd units under contrib/ declare what the daemon does (notify,
// agents that outlive it, a pids and a memory cgroup per bwrap sandbox),
// and their ExecStart is a command line `berth serve` accepts.
func TestSystemdUnits(t *testing.T) {
	units, _ := filepath.Glob("../../contrib/systemd/*.service")
	if len(units) != 2 {
		t.Fatalf("units: %v, want the system and the user one", units)
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		keys := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				keys[k] = v
			}
		}
		for k, want := range map[string]string{"Type": "notify", "NotifyAccess": "main", "KillMode": "process", "Delegate": "pids memory"} {
			if keys[k] != want {
				t.Errorf("%s: %s=%q, want %q", u, k, keys[k], want)
			}
		}
		args := strings.Fields(strings.ReplaceAll(keys["ExecStart"], "%h", t.TempDir()))
		if len(args) < 2 || filepath.Base(args[0]) != "berth" || args[1] != "serve" {
			t.Fatalf("%s: ExecStart=%q", u, keys["ExecStart"])
		}
		// The flags parse: --help after them exits 0, an unknown flag would exit 2.
		if out, err := exec.Command(bin, append(args[1:], "--help")...).CombinedOutput(); err != nil {
			t.Errorf("%s: berth %v: %v\n%s", u, args[1:], err, out)
		}
	}
}
