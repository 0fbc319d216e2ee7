package spawner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrGone is a Spawn's error when the spawner is not there any more: the
// caller starts the process itself.
var ErrGone = errors.New("spawner: gone")

// spawnTimeout bounds one Spawn: a spawner that does not answer is
// treated as gone.
const spawnTimeout = 10 * time.Second

// Client is the daemon's end of a spawner.
type Client struct {
	// mu makes one request at a time: the answers come in order.
	mu   sync.Mutex
	sock *os.File
	gone bool

	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts the spawner program argv (the berth binary and Role) in a
// session of its own, in dir.
func Start(argv []string, dir string) (*Client, error) {
	if len(argv) == 0 {
		return nil, errors.New("spawner: no program")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socketpair", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "spawner")
	defer theirs.Close()
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0])
		return nil, os.NewSyscallError("setnonblock", err)
	}
	// Non-blocking: the runtime's poller serves it, so a Spawn can time out.
	ours := os.NewFile(uintptr(fds[0]), "spawner")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = ours.Close()
		return nil, fmt.Errorf("spawner: start: %w", err)
	}
	c := &Client{sock: ours, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// PID is the spawner's process id.
func (c *Client) PID() int { return c.cmd.Process.Pid }

// Spawn starts req's process with stdin, stdout and fd3 as its
// descriptors 0, 1 and 3, in its own process group in the spawner's
// session. ErrGone when the spawner is not there (or stops answering):
// it is not asked again.
func (c *Client) Spawn(ctx context.Context, req Request, stdin, stdout, fd3 *os.File) (*Child, error) {
	msg, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if len(msg) > maxMessage {
		return nil, fmt.Errorf("spawner: a request of %d bytes is too big", len(msg))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return nil, ErrGone
	}
	deadline := time.Now().Add(spawnTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.sock.SetDeadline(deadline)
	r, pidfd, err := c.roundTrip(msg, unix.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(fd3.Fd())))
	if err != nil {
		// A request half done leaves the answers out of step: none again.
		c.gone = true
		return nil, fmt.Errorf("%w: %v", ErrGone, err)
	}
	if r.Error != "" {
		if pidfd >= 0 {
			_ = unix.Close(pidfd)
		}
		return nil, errors.New(r.Error)
	}
	if pidfd < 0 {
		return nil, fmt.Errorf("spawner: no pidfd for process %d", r.PID)
	}
	return newChild(r.PID, pidfd)
}

// roundTrip sends msg with rights and reads the answer and its pidfd.
func (c *Client) roundTrip(msg, rights []byte) (reply, int, error) {
	rc, err := c.sock.SyscallConn()
	if err != nil {
		return reply{}, -1, err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), msg, rights, nil, unix.MSG_NOSIGNAL)
		return !errors.Is(serr, unix.EAGAIN)
	}); err != nil {
		return reply{}, -1, err
	}
	if serr != nil {
		return reply{}, -1, serr
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return !errors.Is(rerr, unix.EAGAIN)
	}); err != nil {
		return reply{}, -1, err
	}
	if rerr != nil {
		return reply{}, -1, rerr
	}
	if n == 0 {
		return reply{}, -1, errors.New("the spawner closed its end")
	}
	pidfd := -1
	for _, fd := range receivedFDs(oob[:oobn]) {
		if pidfd < 0 {
			pidfd = fd
		} else {
			_ = unix.Close(fd)
		}
	}
	var r reply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		if pidfd >= 0 {
			_ = unix.Close(pidfd)
		}
		return reply{}, -1, err
	}
	return r, pidfd, nil
}

// Close lets the spawner go (the shims it started run on) and waits for
// it to exit.
func (c *Client) Close() error {
	c.mu.Lock()
	c.gone = true
	err := c.sock.Close()
	c.mu.Unlock()
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	return err
}

// Child is a process a spawner started, held by a pidfd.
type Child struct {
	// PID is its process id.
	PID int
	// mu guards pidfd, nil once Wait has seen the exit.
	mu    sync.Mutex
	pidfd *os.File
}

// newChild holds the child pid through pidfd, which it now owns.
func newChild(pid, pidfd int) (*Child, error) {
	if err := unix.SetNonblock(pidfd, true); err != nil {
		_ = unix.Close(pidfd)
		return nil, os.NewSyscallError("setnonblock", err)
	}
	// Non-blocking, so the runtime's poller says when it exits.
	return &Child{PID: pid, pidfd: os.NewFile(uintptr(pidfd), "pidfd")}, nil
}

// Kill sends the child SIGKILL (nothing once it has exited).
func (ch *Child) Kill() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.pidfd == nil {
		return nil
	}
	rc, err := ch.pidfd.SyscallConn()
	if err != nil {
		return err
	}
	var kerr error
	if err := rc.Control(func(fd uintptr) { kerr = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) }); err != nil {
		return err
	}
	if errors.Is(kerr, unix.ESRCH) {
		return nil
	}
	return kerr
}

// Wait returns once the child has exited, and releases its pidfd. It is
// called once.
func (ch *Child) Wait() {
	if rc, err := ch.pidfd.SyscallConn(); err == nil {
		// A pidfd is readable once its process has exited.
		_ = rc.Read(func(fd uintptr) bool {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(p, 0)
			return err == nil && n > 0
		})
	}
	ch.mu.Lock()
	_ = ch.pidfd.Close()
	ch.pidfd = nil
	ch.mu.Unlock()
}
