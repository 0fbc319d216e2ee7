package relay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testenv"
)

// roleVar makes the test binary the relay ("relay") or its agent
// ("call URL": GET URL and print the body; "exit N"; "kill"; "wait": read
// stdin to its end, printing "ready" first).
const roleVar = "BERTH_RELAY_TEST_ROLE"

func TestMain(m *testing.M) {
	role := os.Getenv(roleVar)
	if role != "" {
		// The relays and agents that die of a signal leave no core file.
		_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	}
	switch {
	case role == "relay":
		os.Setenv(roleVar, os.Getenv(roleVar+"_CHILD"))
		os.Exit(Run(Options{Listen: os.Args[1], Socket: os.Args[2], Argv: os.Args[3:], Stderr: os.Stderr}))
	case role == "relay-egress":
		os.Setenv(roleVar, os.Getenv(roleVar+"_CHILD"))
		os.Exit(Run(Options{EgressListen: os.Args[1], EgressSocket: os.Args[2], Argv: os.Args[3:], Stderr: os.Stderr}))
	case strings.HasPrefix(role, "call "):
		resp, err := http.Get(strings.TrimPrefix(role, "call "))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s\n", resp.StatusCode, b)
		os.Exit(0)
	case strings.HasPrefix(role, "exit "):
		var n int
		fmt.Sscan(strings.TrimPrefix(role, "exit "), &n)
		os.Exit(n)
	case role == "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case role == "segv":
		// A shell in this process's place dies of SIGSEGV, as a crashing
		// program does.
		_ = syscall.Exec("/bin/sh", []string{"sh", "-c", "kill -SEGV $$"}, os.Environ())
		os.Exit(1)
	case role == "wait":
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// relayCmd is the relay (this binary) listening on listen, relaying to
// socket, running this binary as its agent in role child.
func relayCmd(t *testing.T, listen, socket, child string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, listen, socket, self)
	cmd.Env = append(os.Environ(), roleVar+"=relay", roleVar+"_CHILD="+child)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// freeAddr is a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// The agent's call to the loopback address reaches the server on the
// socket, and its output is the relay's own standard output.
func TestRelayForwards(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "from the socket: %s", r.URL.Path)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	defer func() { srv.Close(); <-done }()
	addr := freeAddr(t)
	// The relay listens before the agent starts: its first call finds it.
	out, err := relayCmd(t, addr, sock, "call http://"+addr+"/v1/messages").Output()
	if err != nil || string(out) != "200 from the socket: /v1/messages\n" {
		t.Fatalf("agent said %q, %v", out, err)
	}
}

// The relay exits with its agent's code, and dies of its agent's signal.
func TestRelayExitStatus(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	err := relayCmd(t, freeAddr(t), sock, "exit 7").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("agent exit 7: relay %v", err)
	}
	err = relayCmd(t, freeAddr(t), sock, "kill").Run()
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("agent killed: relay %v", err)
	}
	// A signal Go's runtime keeps for itself too, without its dump.
	var stderr strings.Builder
	cmd := relayCmd(t, freeAddr(t), sock, "segv")
	cmd.Stderr = &stderr
	err = cmd.Run()
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGSEGV || stderr.Len() > 0 {
		t.Fatalf("agent died of SIGSEGV: relay %v, stderr %q", err, stderr.String())
	}
}

// A SIGTERM to the relay reaches the agent, which dies of it; so does the
// relay.
func TestRelayForwardsSignals(t *testing.T) {
	cmd := relayCmd(t, freeAddr(t), filepath.Join(t.TempDir(), "s"), "wait")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	b := make([]byte, 6)
	if _, err := io.ReadFull(stdout, b); err != nil || string(b) != "ready\n" {
		t.Fatalf("agent: %q %v", b, err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	testenv.WaitFor(t, 20*time.Second, "the relay to end", func() bool {
		select {
		case werr = <-waited:
			return true
		default:
			return false
		}
	})
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("relay after SIGTERM: %v", werr)
	}
}

// With only an egress address and socket, the relay relays that port to
// that socket (the egress proxy's) and listens on no gateway port.
func TestRelayEgress(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "egress")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "from the egress socket: %s", r.URL.Path)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	defer func() { srv.Close(); <-done }()
	addr := freeAddr(t)
	cmd := relayCmd(t, addr, sock, "call http://"+addr+"/x")
	cmd.Env = append(cmd.Env, roleVar+"=relay-egress")
	out, err := cmd.Output()
	if err != nil || string(out) != "200 from the egress socket: /x\n" {
		t.Fatalf("agent said %q, %v", out, err)
	}
}
