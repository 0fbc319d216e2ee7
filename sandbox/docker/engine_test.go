package docker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
)

// testEngine is a throwaway dockerd on temporary directories and a socket
// of its own, started by TestMain when no BERTH_TEST_DOCKER_HOST is given.
type testEngine struct {
	dir  string
	host string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed once cmd is reaped
}

// startEngine starts dockerd as root with its state under a temp dir, no
// bridge and no iptables (nothing on the host's network changes), and
// extra options, and waits up to a minute for it to answer.
func startEngine(extra ...string) (*testEngine, error) {
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "berth-dockerd-")
	if err != nil {
		return nil, err
	}
	// Crossable: an engine that remaps ids keeps its data where its
	// remapped root must reach.
	if err := os.Chmod(dir, 0o711); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	e := &testEngine{dir: dir, host: "unix://" + filepath.Join(dir, "docker.sock"), done: make(chan struct{})}
	if e.log, err = os.Create(filepath.Join(dir, "dockerd.log")); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	args := append([]string{
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		"-H", e.host,
		"--iptables=false", "--bridge=none", "--log-level=warn"}, extra...)
	e.cmd = exec.Command(dockerd, args...)
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	// Its own group, so stop can signal it whole; SIGTERM if we die.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := e.cmd.Start(); err != nil {
		_ = e.log.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		_ = e.cmd.Wait()
		close(e.done)
	}()
	if err := e.wait(time.Minute); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// wait pings the engine until it answers, it exits, or limit passes.
func (e *testEngine) wait(limit time.Duration) error {
	cli, err := client.New(client.WithHost(e.host))
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Ping(ctx, client.PingOptions{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-e.done:
			return fmt.Errorf("dockerd exited: %s", e.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dockerd did not answer within %s: %v: %s", limit, err, e.tail())
		}
	}
}

// tail is the end of dockerd's log.
func (e *testEngine) tail() string {
	b, _ := os.ReadFile(filepath.Join(e.dir, "dockerd.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// stop shuts dockerd down (SIGTERM to its group, then SIGKILL), kills what
// it left running from our directory (its containerd and shims live in
// sessions of their own), unmounts what is left mounted there and removes
// the directory.
func (e *testEngine) stop() {
	pgid := e.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-e.done
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for range 50 {
		left := processesUnder(e.dir)
		if len(left) == 0 {
			break
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, m := range mountsUnder(e.dir) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	_ = e.log.Close()
	_ = os.RemoveAll(e.dir)
}

// processesUnder lists the pids whose command line names dir.
func processesUnder(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountsUnder lists the mount points at or under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		m := fields[4]
		if m == dir || strings.HasPrefix(m, dir+"/") {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(ms)
}
