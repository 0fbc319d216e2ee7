package docker

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Other local users, for the tests that act as one: the test binary runs
// again as that user (runAs), from a copy every user may execute.

var (
	// helperOnce makes helperPath once per test binary.
	helperOnce sync.Once
	// helperPath is the world-executable copy of the test binary; "" with
	// helperErr when it could not be made. TestMain removes its directory.
	helperPath string
	helperErr  error
)

// helperBinary is the path of a copy of the test binary that any user may
// run (go test's own lies in a 0700 directory of root's).
func helperBinary(t testing.TB) string {
	t.Helper()
	helperOnce.Do(func() {
		helperPath, helperErr = copyHelper()
	})
	if helperErr != nil {
		t.Fatalf("cannot copy the test binary for another user: %v", helperErr)
	}
	return helperPath
}

// copyHelper copies the running test binary into a fresh 0755 directory.
func copyHelper() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "berth-docker-helper-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst := filepath.Join(dir, "docker.test")
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, src); err != nil {
		_ = out.Close()
		return "", err
	}
	return dst, out.Close()
}

// removeHelper removes the copy helperBinary made, if any.
func removeHelper() {
	if helperPath != "" {
		_ = os.RemoveAll(filepath.Dir(helperPath))
	}
}

// runAs runs the test binary's copy with args as uid:gid, without
// supplementary groups (so without any capability), with env alone for
// its environment, within two minutes, and returns its stdout; its stderr
// is in the error.
func runAs(t testing.TB, uid, gid int, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helperBinary(t), args...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return stdout.String(), fmt.Errorf("%w: %s%s", err, stdout.String(), stderr.String())
		}
		return stdout.String(), nil
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return stdout.String(), fmt.Errorf("the helper as uid %d did not end within two minutes: %s", uid, stderr.String())
	}
}

// loginUser returns the uid and gid of a real login account at uid want:
// the one /etc/passwd has, or one the test makes with useradd and deletes
// when it ends.
func loginUser(t testing.TB, want int) (uid, gid int) {
	t.Helper()
	if u, err := user.LookupId(strconv.Itoa(want)); err == nil {
		gid, err := strconv.Atoi(u.Gid)
		if err != nil {
			t.Fatalf("account %s's gid %q: %v", u.Username, u.Gid, err)
		}
		return want, gid
	}
	name := "berthtest" + randomHex(3)
	out, err := exec.Command("useradd", "--uid", strconv.Itoa(want), "--user-group", "--no-create-home",
		"--shell", "/bin/sh", name).CombinedOutput()
	if err != nil {
		t.Fatalf("useradd %s with uid %d: %v: %s", name, want, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if gid, err = strconv.Atoi(u.Gid); err != nil {
		t.Fatal(err)
	}
	return want, gid
}

// freeUID returns a uid at or above from that names no account.
func freeUID(t testing.TB, from int) int {
	t.Helper()
	for uid := from; uid < from+1000; uid++ {
		if _, err := user.LookupId(strconv.Itoa(uid)); err != nil {
			if _, err := user.LookupGroupId(strconv.Itoa(uid)); err != nil {
				return uid
			}
		}
	}
	t.Fatalf("no free uid from %d", from)
	return 0
}

// engineProxy serves, on a socket every user may connect to, a byte-for-
// byte relay to the unix socket (root's) of the engine at host, so that a
// test binary run as another user reaches the same engine. It returns the
// proxy's DOCKER_HOST; it stops when the test ends.
func engineProxy(t testing.TB, host string) string {
	t.Helper()
	target, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		return host
	}
	dir, err := os.MkdirTemp("", "berth-docker-proxy-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			track(c)
			track(up)
			wg.Go(func() { relay(up, c) })
			wg.Go(func() { relay(c, up) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
		_ = os.RemoveAll(dir)
	})
	return "unix://" + sock
}

// relay copies from src to dst, then half-closes dst's writing side (an
// attach stream ends that way) or, failing that, closes it.
func relay(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if uc, ok := dst.(*net.UnixConn); ok && err == nil && uc.CloseWrite() == nil {
		return
	}
	_ = dst.Close()
}
