package bwrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/procgroup"
	"github.com/berth-sh/berth/internal/syncx"
)

// DefaultSlirpPath is where Debian installs slirp4netns.
const DefaultSlirpPath = "/usr/bin/slirp4netns"

// slirpResolvConf is the sandbox's /etc/resolv.conf with network on:
// slirp4netns answers DNS at 10.0.2.3 and forwards it to the host's own
// resolvers, whatever address (a loopback one included) those have.
const slirpResolvConf = "nameserver 10.0.2.3\n"

// slirpGuestAddr is the address slirp4netns --configure gives tap0.
const slirpGuestAddr = "10.0.2.100"

// slirpStopTimeout bounds how long stopping slirp4netns waits for it to
// exit by itself once told to, before killing it.
const slirpStopTimeout = 5 * time.Second

// userNet is the user-mode network of one bwrap with network on.
//
// A sandbox never shares the host's network namespace: the host's
// loopback carries the daemon's API and whatever else the host keeps
// private. The sandbox gets a network namespace of its own and, told by
// --block-fd, bwrap waits before it runs anything there; slirp4netns (a
// process of its own group, started by the provider) then attaches a tap
// device to that namespace, routes it through the host's network stack
// with --disable-host-loopback (10.0.2.2, slirp's alias of the host's
// 127.0.0.1, is refused), and says when the network is up; only then does
// bwrap go on. slirp4netns exits when its exit descriptor closes: when
// the sandbox's process is reaped, or when the daemon itself dies.
//
// Who makes the namespace depends on the daemon:
//
//   - a root daemon's bwrap makes it (--unshare-all), owned by bwrap's
//     user namespace; slirp4netns, as root, joins it through a pinned
//     descriptor (--netns-type=path);
//   - a daemon that is not root starts the outer bwrap in a user and
//     network namespace of its own making (its uid and gid mapped to 0
//     there, see ownNamespaces), and bwrap shares that network namespace
//     (--share-net) while it still nests the sandbox's user namespace.
//     slirp4netns, unprivileged, must act from the user namespace that
//     owns the network namespace as uid 0 there (--enable-sandbox makes
//     it setegid(0) in it): in bwrap's own, only the sandbox's uid is
//     mapped and that fails. It is given the outer bwrap's pid, whose
//     namespaces are both ours (pid mode).
type userNet struct {
	path string
	// session names the sandbox's session in slirp4netns's environment,
	// so that a leftover can be traced to its session.
	session string
	// block is the write end of the pipe bwrap reads with --block-fd.
	block *os.File
	// own is set when the daemon made the network namespace (a daemon
	// that is not root): slirp4netns then joins the outer bwrap's.
	own bool

	mu   sync.Mutex
	proc *procgroup.Proc
	// exit is the write end of slirp4netns's --exit-fd pipe.
	exit   *os.File
	stderr *syncx.Tail
}

// attach starts slirp4netns on the sandbox's network namespace, waits
// until it has brought the network up, then lets bwrap go on. init is the
// sandbox's init, pinned by pidfd; outer is the outer bwrap, a child of
// ours.
func (n *userNet) attach(ctx context.Context, deadline time.Time, init, outer, pidfd int) error {
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readyR.Close()
	exitR, exitW, err := os.Pipe()
	if err != nil {
		_ = readyW.Close()
		return err
	}
	fail := func(err error) error {
		_ = readyW.Close()
		_ = exitR.Close()
		_ = exitW.Close()
		return err
	}
	// Descriptors 3 and 4 (then 5) in slirp4netns (exec.Cmd.ExtraFiles).
	extra := []*os.File{readyW, exitR}
	// slirp4netns parses the agent's raw packets: it runs in a mount
	// namespace of its own with every capability but NET_BIND_SERVICE
	// dropped, under its own seccomp filter.
	args := []string{n.path, "--configure", "--mtu=65520", "--disable-host-loopback",
		"--enable-sandbox", "--enable-seccomp", "--ready-fd=3", "--exit-fd=4"}
	if n.own {
		// The outer bwrap's namespaces are ours. Its pid names them only
		// while it is unreaped: verifyNet checks, once slirp4netns is
		// ready, that the sandbox's namespace is the one it set up.
		args = append(args, strconv.Itoa(outer), "tap0")
	} else {
		// bwrap sets its loopback up over netlink while it makes the
		// sandbox; slirp4netns configuring the namespace at the same time
		// makes that fail now and then ("loopback: Failed RTM_NEWADDR").
		if err := awaitLoopback(ctx, deadline, init); err != nil {
			return fail(err)
		}
		// The sandbox's network namespace, pinned: slirp4netns joins it
		// through this descriptor, never through the pid, whose user
		// namespace bwrap may have nested by then (--disable-userns).
		netns, err := os.Open("/proc/" + strconv.Itoa(init) + "/ns/net")
		if err != nil {
			return fail(fmt.Errorf("open the sandbox's network namespace: %w", err))
		}
		defer netns.Close()
		extra = append(extra, netns)
		args = append(args, "--netns-type=path", "/proc/self/fd/5", "tap0")
	}
	n.stderr = syncx.NewTail(maxWords)
	cmd := &exec.Cmd{
		Path:       n.path,
		Args:       args,
		Env:        []string{"BERTH_SESSION_ID=" + n.session},
		Dir:        "/",
		Stdout:     io.Discard,
		Stderr:     n.stderr,
		ExtraFiles: extra,
	}
	proc, err := procgroup.StartProc(cmd)
	_ = readyW.Close()
	_ = exitR.Close()
	if err != nil {
		_ = exitW.Close()
		return fmt.Errorf("start slirp4netns: %w", err)
	}
	if w := proc.Stdin(); w != nil {
		_ = w.Close()
	}
	n.mu.Lock()
	n.proc, n.exit = proc, exitW
	n.mu.Unlock()
	_ = readyR.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = readyR.SetReadDeadline(time.Now()) })
	defer stop()
	b := make([]byte, 1)
	if _, err := readyR.Read(b); err != nil {
		n.stop()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("slirp4netns failed: %s", strings.TrimSpace(n.stderr.String()))
		}
		return fmt.Errorf("waiting for slirp4netns: %w", err)
	}
	if n.own {
		if err := verifyNet(init, pidfd); err != nil {
			n.stop()
			return err
		}
	}
	if _, err := n.block.Write([]byte{1}); err != nil {
		return fmt.Errorf("release bwrap: %w", err)
	}
	return nil
}

// verifyNet checks that the network namespace of init (pinned by pidfd)
// is up as slirp4netns sets it up: its tap0 address (10.0.2.100) and its
// loopback (slirp4netns sets lo up; bwrap does not when it shares the
// namespace) are routed. slirp4netns told ready of a namespace other than
// the sandbox's (the pid it was given taken over by then) fails here.
func verifyNet(init, pidfd int) error {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(init) + "/net/fib_trie")
	if err != nil || exited(pidfd) {
		return errors.New("the sandbox ended while slirp4netns set its network up")
	}
	for _, addr := range []string{slirpGuestAddr, "127.0.0.1"} {
		if !strings.Contains(string(b), addr) {
			return fmt.Errorf("slirp4netns said ready, but %s is not up in the sandbox's network namespace", addr)
		}
	}
	return nil
}

// stop ends slirp4netns, if it runs, and reaps it: its exit descriptor
// closes, then SIGKILL to its group should it linger. Idempotent.
func (n *userNet) stop() {
	n.mu.Lock()
	proc, exit := n.proc, n.exit
	n.exit = nil
	n.mu.Unlock()
	if exit != nil {
		_ = exit.Close()
	}
	if n.block != nil {
		_ = n.block.Close()
	}
	if proc == nil {
		return
	}
	t := time.NewTimer(slirpStopTimeout)
	defer t.Stop()
	select {
	case <-proc.Done():
	case <-t.C:
	}
	// The group may hold nothing but it is cheap to be sure.
	_ = proc.Signal(syscall.SIGKILL)
	<-proc.Done()
}

// awaitLoopback waits until the network namespace of pid has its
// loopback address routed (bwrap has set lo up), or the deadline passes,
// or pid is gone.
func awaitLoopback(ctx context.Context, deadline time.Time, pid int) error {
	trie := "/proc/" + strconv.Itoa(pid) + "/net/fib_trie"
	return poll(ctx, deadline, "the sandbox's loopback", func() (bool, error) {
		b, err := os.ReadFile(trie)
		if err != nil {
			return false, fmt.Errorf("the sandbox's init is gone: %w", err)
		}
		return strings.Contains(string(b), "127.0.0.1"), nil
	})
}

// slirpPath is where slirp4netns is, or "" when it is not installed.
func slirpPath() string {
	if _, err := os.Stat(DefaultSlirpPath); err == nil {
		return DefaultSlirpPath
	}
	if p, err := exec.LookPath("slirp4netns"); err == nil {
		return p
	}
	return ""
}
