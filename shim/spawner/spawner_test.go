package spawner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// envRole makes the test binary the spawner or one of its children.
const envRole = "BERTH_SPAWNER_TEST"

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "spawner":
		os.Exit(Main())
	case "child":
		// Where it runs, then a byte on descriptor 3; it exits at the end
		// of its standard input.
		sid, _ := unix.Getsid(0)
		fmt.Printf("%d %d %d\n", sid, unix.Getpgrp(), os.Getppid())
		_, _ = os.NewFile(3, "fd3").Write([]byte("x"))
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is a process started through a spawner, with our ends of its
// descriptors.
type child struct {
	*Child
	stdin  *os.File
	stdout *bufio.Reader
	fd3    *os.File
	exited chan struct{}
}

// spawnChild starts the test binary as a child through c.
func spawnChild(t *testing.T, c *Client) *child {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	self, _ := os.Executable()
	ch, err := c.Spawn(context.Background(), Request{Argv: []string{self}, Env: []string{envRole + "=child"}, Dir: t.TempDir()},
		inR, outW, theirs)
	_, _, _ = inR.Close(), outW.Close(), theirs.Close()
	if err != nil {
		t.Fatal(err)
	}
	k := &child{Child: ch, stdin: inW, stdout: bufio.NewReader(outR), fd3: ours, exited: make(chan struct{})}
	go func() {
		ch.Wait()
		close(k.exited)
	}()
	t.Cleanup(func() {
		_ = ch.Kill()
		<-k.exited
		_, _, _ = inW.Close(), outR.Close(), ours.Close()
	})
	return k
}

// where reads the child's session, process group and parent.
func (k *child) where(t *testing.T) (sid, pgid, ppid int) {
	t.Helper()
	line, err := k.stdout.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscan(line, &sid, &pgid, &ppid); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return sid, pgid, ppid
}

// waitExit fails unless the child exits within a few seconds.
func (k *child) waitExit(t *testing.T, why string) {
	t.Helper()
	select {
	case <-k.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the child (pid %d) did not exit", why, k.PID)
	}
}

// startSpawner starts the test binary as a spawner.
func startSpawner(t *testing.T) *Client {
	t.Helper()
	self, _ := os.Executable()
	t.Setenv(envRole, "spawner")
	c, err := Start([]string{self}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Every process a spawner starts is in its own process group, in the
// spawner's session — not the daemon's, and not one of its own — with its
// descriptors as given; it is reaped when it exits, and the pidfd kills
// it and tells of its exit.
func TestChildrenShareTheSpawnersSession(t *testing.T) {
	c := startSpawner(t)
	a, b := spawnChild(t, c), spawnChild(t, c)
	for _, k := range []*child{a, b} {
		sid, pgid, ppid := k.where(t)
		if sid != c.PID() || ppid != c.PID() || pgid != k.PID {
			t.Fatalf("child %d: session %d, group %d, parent %d; want session and parent %d (the spawner), group %d",
				k.PID, sid, pgid, ppid, c.PID(), k.PID)
		}
		if mine, _ := unix.Getsid(0); sid == mine {
			t.Fatalf("child %d is in the caller's session", k.PID)
		}
		var one [1]byte
		if _, err := io.ReadFull(k.fd3, one[:]); err != nil || one[0] != 'x' {
			t.Fatalf("child %d's descriptor 3: %q, %v", k.PID, one, err)
		}
	}
	// The end of its input ends a; the spawner reaps it.
	_ = a.stdin.Close()
	a.waitExit(t, "stdin closed")
	deadline := time.Now().Add(5 * time.Second)
	for zombie(a.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d is a zombie: the spawner did not reap it", a.PID)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	b.waitExit(t, "killed")
	if err := b.Kill(); err != nil {
		t.Fatalf("a kill after the exit: %v", err)
	}
}

// zombie reports whether pid is a process that exited and was not reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] == "Z"
}

// The spawner leaves with the daemon's end — a daemon killed included —
// and what it started runs on; a spawner that is gone is not asked again.
func TestChildrenOutliveTheSpawner(t *testing.T) {
	c := startSpawner(t)
	k := spawnChild(t, c)
	k.where(t)
	// As a daemon killed with SIGKILL leaves it: its end closed.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(k.PID, 0); err != nil {
		t.Fatalf("the child went with the spawner: %v", err)
	}
	select {
	case <-k.exited:
		t.Fatal("the child exited with the spawner")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := c.Spawn(context.Background(), Request{Argv: []string{"/bin/true"}}, os.Stdin, os.Stdout, os.Stderr); !errors.Is(err, ErrGone) {
		t.Fatalf("a spawn after the close: %v, want ErrGone", err)
	}

	c2 := startSpawner(t)
	if err := syscall.Kill(c2.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c2.exited
	if _, err := c2.Spawn(context.Background(), Request{Argv: []string{"/bin/true"}}, os.Stdin, os.Stdout, os.Stderr); !errors.Is(err, ErrGone) {
		t.Fatalf("a spawn through a killed spawner: %v, want ErrGone", err)
	}
}

// A program that cannot start is the request's error, and the spawner
// goes on serving.
func TestABadProgramIsTheRequestsError(t *testing.T) {
	c := startSpawner(t)
	_, err := c.Spawn(context.Background(), Request{Argv: []string{"/nonexistent/berth-shim"}}, os.Stdin, os.Stdout, os.Stderr)
	if err == nil || errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("spawn of a missing program: %v", err)
	}
	k := spawnChild(t, c)
	if sid, _, _ := k.where(t); sid != c.PID() {
		t.Fatalf("after a failed request: session %d, want %d", sid, c.PID())
	}
}
