// Package shim keeps a session's agent running while the daemon that
// started it restarts, the way a containerd shim keeps a container.
//
// One shim process runs per session, in a session and process group of
// its own. It starts the agent through the session's sandbox provider,
// holds the agent's stdio, appends everything the agent writes on stdout
// to a spool file, and serves one daemon at a time on a Unix socket. A
// daemon that connects says from which stdout offset it wants the stream;
// the shim replays the spool from there and goes on live. The shim also
// watches the JSON-RPC traffic both ways, so that a daemon that connects
// after a restart learns which of its requests (a prompt in flight) and
// which of the agent's (a permission, a file read) are still unanswered.
// The shim reaps the agent, reports how it ended, and exits once a daemon
// has that report, or after a bounded linger.
//
// The wire protocol is a stream of frames: one type byte, a big-endian
// uint32 payload length, the payload.
package shim

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/berth-sh/berth/internal/core"
)

// Frame types. Lower case travel from the daemon to the shim, upper case
// from the shim to the daemon.
const (
	// frameAttach opens a connection: attachRequest.
	frameAttach = 'a'
	// frameStdin is bytes for the agent's stdin, whole JSON-RPC lines.
	frameStdin = 'i'
	// frameCloseStdin closes the agent's stdin.
	frameCloseStdin = 'c'
	// frameSignal sends a signal to the agent's process group: signalRequest.
	frameSignal = 'k'
	// frameStop stops the agent (TERM, grace, KILL): stopRequest.
	frameStop = 's'
	// frameAck says the daemon has durably processed the stream up to an
	// offset (ackRequest): the spool may drop what is before it.
	frameAck = 'p'
	// frameExitAck says the daemon has the exit status: the shim may go.
	frameExitAck = 'x'

	// frameHello answers frameAttach: Hello.
	frameHello = 'H'
	// frameStdout is the agent's stdout, in order from the attach offset.
	frameStdout = 'O'
	// frameStderr is the agent's stderr (what was written while no daemon
	// was connected is kept up to a cap).
	frameStderr = 'E'
	// frameExit is how the agent ended: core.ExitStatus. It follows the
	// last stdout frame.
	frameExit = 'W'
)

// maxFrame caps a frame's payload: a JSON-RPC line may be up to 64 MiB.
// A hello carries every unanswered request line whole: maxHello caps it.
const (
	maxFrame = 64<<20 + 1024
	maxHello = 1 << 30
)

// attachRequest is the payload of frameAttach.
type attachRequest struct {
	// From is the stdout offset the daemon wants the stream from.
	From int64 `json:"from"`
}

// signalRequest is the payload of frameSignal.
type signalRequest struct {
	Signal int `json:"signal"`
}

// stopRequest is the payload of frameStop.
type stopRequest struct {
	GraceMillis int64 `json:"grace_ms"`
}

// ackRequest is the payload of frameAck.
type ackRequest struct {
	Offset int64 `json:"offset"`
}

// Hello is what a shim tells a daemon that attaches.
type Hello struct {
	SessionID string `json:"session_id"`
	// ShimPID is the shim's pid; AgentPID the agent's, which is also its
	// process group.
	ShimPID  int `json:"shim_pid"`
	AgentPID int `json:"agent_pid"`
	// Ref names the sandbox for the provider (a container id), if any.
	Ref string `json:"ref,omitempty"`
	// From is where the stream the shim sends next starts: the offset the
	// daemon asked for, or the spool's start when that is later.
	From int64 `json:"from"`
	// End is how much stdout the agent has written so far.
	End int64 `json:"end"`
	// Exited is how the agent ended, once it has.
	Exited *core.ExitStatus `json:"exited,omitempty"`
	// Requests are the agent's requests no daemon has answered, in the
	// order the agent sent them.
	Requests []Request `json:"requests,omitempty"`
	// Calls are the daemon's requests the agent has not answered.
	Calls []Call `json:"calls,omitempty"`
	// LastID is the highest numeric request id a daemon has sent.
	LastID int64 `json:"last_id"`
	// OutputKept is how much output of the window in flight (see window)
	// the spool kept before From: what the daemon reads from From on, it
	// counts itself (zero for a window that began after From).
	// OutputTruncated says the window dropped some, reported before From.
	OutputKept      int64 `json:"output_kept,omitempty"`
	OutputTruncated bool  `json:"output_truncated,omitempty"`
}

// Request is one agent→daemon request still waiting for its answer.
type Request struct {
	// End is the stdout offset just past the request's line.
	End  int64           `json:"end"`
	Line json.RawMessage `json:"line"`
}

// Call is one daemon→agent request whose answer a daemon may not have
// processed: not answered yet, or answered at AnsweredAt (the end of the
// answer's line) past what the daemon said it has.
type Call struct {
	ID         json.RawMessage `json:"id"`
	Method     string          `json:"method"`
	AnsweredAt int64           `json:"answered_at,omitempty"`
}

// appendFrame appends one frame to buf.
func appendFrame(buf []byte, typ byte, payload []byte) []byte {
	buf = append(buf, typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(buf[len(buf)-4:], uint32(len(payload)))
	return append(buf, payload...)
}

// readFrame reads one frame of at most maxFrame bytes. The payload is a
// fresh slice.
func readFrame(r *bufio.Reader) (byte, []byte, error) { return readFrameMax(r, maxFrame) }

// readFrameMax reads one frame of at most limit bytes.
func readFrameMax(r *bufio.Reader, limit uint32) (byte, []byte, error) {
	return readFrameInto(r, limit, nil)
}

// readFrameInto reads one frame of at most maxFrame bytes into buf when it
// is large enough (the payload is then valid until buf is reused), else
// into a fresh slice.
func readFrameInto(r *bufio.Reader, limit uint32, buf []byte) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > limit {
		return 0, nil, fmt.Errorf("shim: frame of %d bytes is over the cap", n)
	}
	payload := buf[:0]
	if uint32(cap(buf)) < n {
		payload = make([]byte, n)
	}
	payload = payload[:n]
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return hdr[0], payload, nil
}
