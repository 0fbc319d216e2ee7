// Package spawner starts a daemon's shims from one process, so that they
// all share one session — and so one scheduling group.
//
// Linux's autogroup scheduling (on by default, for every process outside
// a cpu cgroup of its own) gives each session the weight of one process.
// A shim must leave the daemon's session to outlive it, and one started
// with setsid is a session of its own: a thousand shims weighed as much
// as a thousand daemons, and the few dozen that a boot or a burst of
// prompts wakes at once left the daemon a sliver of the CPU it needed to
// answer. The spawner is started once per daemon in a session of its
// own, and starts every shim in it (each in its own process group): the
// shims and their agents, together, weigh as much as the daemon.
//
// The daemon sends a Request, with the child's standard input, output and
// daemon connection as descriptors, on a SOCK_SEQPACKET socket pair; the
// spawner answers with the child's pid and a pidfd for it, through which
// the daemon signals it and learns of its exit without the race of a
// reused pid. The spawner reaps its children. It exits when the daemon's
// end closes — a daemon killed with SIGKILL included — and leaves the
// shims running (init reaps them then), as the daemon does.
//
// The spawner runs as the berth binary's hidden command `shim-spawner`,
// entered before the daemon's libraries are initialised
// (cmd/berth/internal/childentry): its imports are kept to packages that
// initialise early.
package spawner

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// Role is the hidden command of the berth binary that runs Main.
const Role = "shim-spawner"

// Request is one process the daemon asks for. Its standard input and
// output, and its descriptor 3, come with it (SCM_RIGHTS); its standard
// error is /dev/null.
type Request struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir,omitempty"`
}

// reply answers a Request: the child's pid (its pidfd comes with it), or
// why it did not start.
type reply struct {
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// fdsPerRequest is the number of descriptors a Request carries: the
// child's standard input, standard output and descriptor 3.
const fdsPerRequest = 3

// maxMessage bounds a Request (its environment is most of it).
const maxMessage = 1 << 20

// sockFD is the spawner's end of the socket pair.
const sockFD = 3

// Main serves requests on descriptor 3 until the daemon's end closes,
// and returns the exit code.
func Main() int {
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(fdsPerRequest*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(sockFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			// The daemon is gone: the shims go on without us.
			return 0
		}
		var files []*os.File
		for _, fd := range receivedFDs(oob[:oobn]) {
			files = append(files, os.NewFile(uintptr(fd), "passed"))
		}
		r, pidfd := start(buf[:n], files)
		for _, f := range files {
			_ = f.Close()
		}
		if err := send(r, pidfd); err != nil {
			return 0
		}
	}
}

// start starts the process msg asks for with files as its descriptors 0,
// 1 and 3, and returns the reply and the child's pidfd (-1 if none).
func start(msg []byte, files []*os.File) (reply, int) {
	var req Request
	if err := json.Unmarshal(msg, &req); err != nil {
		return reply{Error: "spawner: bad request: " + err.Error()}, -1
	}
	if len(req.Argv) == 0 || len(files) != fdsPerRequest {
		return reply{Error: "spawner: a request needs a program and three descriptors"}, -1
	}
	cmd := &exec.Cmd{Path: req.Argv[0], Args: req.Argv, Env: req.Env, Dir: req.Dir,
		Stdin: files[0], Stdout: files[1], ExtraFiles: files[2:],
		// Its own process group, in the spawner's session.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if err := cmd.Start(); err != nil {
		return reply{Error: "spawner: " + err.Error()}, -1
	}
	// The daemon's pidfd is a file of its own (it makes it non-blocking,
	// which a shared one would make ours too), opened before the child
	// can be reaped, so its pid is not someone else's yet.
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK)
	// The child is ours to reap; the goroutine ends with it, or with us.
	go func() { _ = cmd.Wait() }()
	if err != nil {
		// A child the daemon cannot hold is not left to run.
		_ = cmd.Process.Kill()
		return reply{Error: "spawner: pidfd_open: " + err.Error()}, -1
	}
	return reply{PID: cmd.Process.Pid}, pidfd
}

// send writes r, with pidfd when there is one (then closed: the daemon
// has its own).
func send(r reply, pidfd int) error {
	b, _ := json.Marshal(r)
	var oob []byte
	if pidfd >= 0 {
		oob = unix.UnixRights(pidfd)
		defer unix.Close(pidfd)
	}
	for {
		err := unix.Sendmsg(sockFD, b, oob, nil, 0)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// receivedFDs are the descriptors of a message's SCM_RIGHTS, now the
// receiver's to close.
func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}
