// Package mcprelay is `berth mcp`, the berth MCP server as an agent starts
// it: a relay of the agent's newline-delimited JSON-RPC on stdin and stdout
// to the server the daemon runs behind the session's tools socket (an
// HTTP/1.1 upgrade of core.ToolsMCPPath, authorised by the session's
// credential).
//
// Agents outlive the daemon, and so does the relay. When the daemon goes
// away it answers the calls that were in flight (they may have run: the
// agent may look), holds what the agent sends next for up to Options.Wait
// while it dials again, and on the new connection replays the agent's
// initialize (its answer kept from the agent) and initialized before the
// rest: the agent sees one server throughout.
//
// It links neither net nor the root package (see internal/rawsock): a
// plain build of berth enters it from cmd/berth/internal/childentry's
// init, before the daemon's libraries are initialised, so that each
// session's `berth mcp` costs about what the gateway relay does rather
// than a whole berth program with its MCP and JSON Schema libraries.
package mcprelay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/rawsock"
)

// DefaultWait is how long a message waits for a daemon to relay it to.
const DefaultWait = 30 * time.Second

// handshakeTimeout bounds a dial and its upgrade.
const handshakeTimeout = 10 * time.Second

// Conn is a connection to the tools socket.
type Conn interface {
	io.ReadWriteCloser
	SetReadDeadline(t time.Time) error
}

// Options say what a relay relays.
type Options struct {
	// Socket is the tools socket's path, Token the session's credential.
	Socket, Token string
	// In and Out are the agent's side: its requests in, the answers out.
	In  io.Reader
	Out io.Writer
	// Log takes what the relay has to say (the agent's stderr).
	Log io.Writer
	// Wait bounds how long a message waits for a daemon (DefaultWait when 0).
	Wait time.Duration
	// Dial connects to Socket (rawsock.Dial when nil).
	Dial func(ctx context.Context, path string) (Conn, error)
}

// Main runs `berth mcp` on the process's stdin and stdout with the socket
// and credential of its environment, and returns its exit code.
func Main() int {
	o := Options{Socket: os.Getenv(core.ToolsSocketEnv), Token: os.Getenv(core.ToolsTokenEnv),
		In: os.Stdin, Out: os.Stdout, Log: os.Stderr}
	if o.Socket == "" || o.Token == "" {
		fmt.Fprintf(os.Stderr, "berth mcp: %s and %s must be set (the daemon gives them to the agent)\n",
			core.ToolsSocketEnv, core.ToolsTokenEnv)
		return 2
	}
	if err := Run(o); err != nil {
		fmt.Fprintf(os.Stderr, "berth mcp: %v\n", err)
		return 1
	}
	return 0
}

// Run relays until the agent's side ends (nil) or cannot be written to.
// In the second case the reader of In may be blocked in a read that
// nothing can interrupt (a pipe that stays open): Run closes In, when it
// is a Closer, and returns without waiting for it (the process ends).
func Run(o Options) error {
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Dial == nil {
		o.Dial = func(ctx context.Context, path string) (Conn, error) { return rawsock.Dial(ctx, path) }
	}
	r := &relay{o: o, pending: map[string]string{}, fromAgent: make(chan []byte), fromDaemon: make(chan daemonLine),
		quit: make(chan struct{})}
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		r.readAgent()
	}()
	err := r.loop()
	close(r.quit)
	r.disconnect()
	r.readers.Wait()
	if err != nil {
		if c, ok := o.In.(io.Closer); ok {
			_ = c.Close()
		}
		return err
	}
	<-agentDone
	return nil
}

// relay is one `berth mcp`'s state, owned by loop.
type relay struct {
	o Options

	fromAgent  chan []byte // the agent's messages; closed at its EOF
	fromDaemon chan daemonLine
	quit       chan struct{} // closed when loop has ended
	// readers counts the connections' readers, which end with them.
	readers sync.WaitGroup

	conn Conn
	gen  int // the connection's number: lines of an older one are stale
	// pending are the agent's requests sent on conn, by id, with their method.
	pending map[string]string
	// queue holds the agent's messages while there is no connection, or
	// while the replayed initialize awaits its answer.
	queue []queued
	// initLine and initializedLine are the agent's initialize request and
	// initialized notification, replayed to each new connection once
	// initialized says the first went to a daemon.
	initLine, initializedLine []byte
	initialized               bool
	// replaying is the id (as JSON) of the replayed initialize awaiting
	// its answer.
	replaying string
	// retry fires while messages wait: the next dial when there is no
	// connection, a look for those waited too long while a replay is
	// answered; nil when nothing waits.
	retry   <-chan time.Time
	backoff time.Duration
	// made are the answers the relay made itself, for flushOut to write.
	made [][]byte
}

// queued is one of the agent's messages waiting for a connection.
type queued struct {
	line []byte
	h    header
	at   time.Time
}

// daemonLine is one message from connection gen, or its end (err).
type daemonLine struct {
	gen  int
	line []byte
	err  error
}

// header is what the relay reads of a JSON-RPC message.
type header struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// request reports whether h is a request (an answer is owed).
func (h header) request() bool { return h.Method != "" && len(h.ID) > 0 && string(h.ID) != "null" }

// response reports whether h is an answer to a request.
func (h header) response() bool { return h.Method == "" && len(h.ID) > 0 && string(h.ID) != "null" }

// parse reads a message's header; a message that is not a JSON object
// gets the zero header (relayed as it is: the server answers it).
func parse(line []byte) header {
	var h header
	_ = json.Unmarshal(line, &h)
	return h
}

// idKey is a request id as a map key: a number in its integer form, so
// that 1 and 1.0 are one id, anything else as written.
func idKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if n, err := strconv.ParseFloat(string(raw), 64); err == nil && n == float64(int64(n)) {
		return strconv.FormatInt(int64(n), 10)
	}
	return string(raw)
}

// loop is the relay's one goroutine of state.
func (r *relay) loop() error {
	for {
		select {
		case line, ok := <-r.fromAgent:
			if !ok {
				return nil
			}
			r.fromTheAgent(line)
		case m := <-r.fromDaemon:
			switch {
			case m.gen != r.gen || r.conn == nil:
				// A line of a connection already given up.
			case m.err != nil:
				r.lost(m.err)
			default:
				if err := r.fromTheDaemon(m.line); err != nil {
					return err
				}
			}
		case <-r.retry:
			r.retry = nil
			if r.conn == nil {
				r.dial()
			} else {
				r.expire(errors.New("the daemon has not answered the session's initialize again"))
				r.lookLater()
			}
		}
		if err := r.flushOut(); err != nil {
			return err
		}
	}
}

// fromTheAgent sends (or queues) one of the agent's messages.
func (r *relay) fromTheAgent(line []byte) {
	h := parse(line)
	switch {
	case h.Method == "initialize" && h.request():
		r.initLine = line
	case h.Method == "notifications/initialized":
		r.initializedLine = line
	}
	if r.conn == nil || r.replaying != "" {
		r.queue = append(r.queue, queued{line: line, h: h, at: time.Now()})
		switch {
		case r.conn == nil && r.retry == nil:
			r.dial()
		case r.conn != nil:
			r.lookLater()
		}
		return
	}
	r.send(line, h)
}

// send writes one of the agent's messages on the connection.
func (r *relay) send(line []byte, h header) {
	if err := writeLine(r.conn, line); err != nil {
		// Not read whole by the server: it goes again on the next connection.
		r.queue = append(r.queue, queued{line: line, h: h, at: time.Now()})
		r.lost(err)
		return
	}
	if h.request() {
		r.pending[idKey(h.ID)] = h.Method
		if h.Method == "initialize" {
			r.initialized = true
		}
	}
}

// fromTheDaemon passes one of the server's messages to the agent, but
// for the answer to a replayed initialize.
func (r *relay) fromTheDaemon(line []byte) error {
	h := parse(line)
	if r.replaying != "" && h.response() && idKey(h.ID) == r.replaying {
		r.replaying = ""
		var answer struct {
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &answer) == nil && answer.Error != nil {
			fmt.Fprintf(r.o.Log, "berth mcp: the daemon refused the session's initialize again: %s\n", answer.Error.Message)
			r.failQueue("unavailable: the berth MCP server refused this session after the daemon's restart: " + answer.Error.Message)
			r.disconnect()
			return nil
		}
		if r.initializedLine != nil {
			r.send(r.initializedLine, parse(r.initializedLine))
		}
		r.flushQueue()
		return nil
	}
	if h.response() {
		delete(r.pending, idKey(h.ID))
	}
	return r.toAgent(line)
}

// flushQueue sends the queued messages, in order, while connected.
func (r *relay) flushQueue() {
	for len(r.queue) > 0 && r.conn != nil && r.replaying == "" {
		q := r.queue[0]
		r.queue = r.queue[1:]
		r.send(q.line, q.h)
	}
	if len(r.queue) == 0 {
		r.queue = nil
	}
}

// dial connects to the daemon, replays the agent's initialization or
// sends the queue; on failure it schedules another try, and fails the
// messages that have waited too long.
func (r *relay) dial() {
	conn, br, err := r.connect()
	if err != nil {
		var refused *refusal
		if errors.As(err, &refused) && refused.final() {
			r.failQueue(refused.Error())
			return
		}
		r.expire(err)
		if len(r.queue) > 0 {
			r.backoff = min(max(2*r.backoff, 50*time.Millisecond), time.Second)
			r.retry = time.After(r.backoff)
		}
		return
	}
	r.backoff = 0
	r.conn = conn
	r.gen++
	r.readers.Add(1)
	go r.readDaemon(r.gen, br)
	if r.initialized && r.initLine != nil {
		r.replaying = strconv.Quote("berth-mcp-replay-" + strconv.Itoa(r.gen))
		replay, err := withID(r.initLine, json.RawMessage(r.replaying))
		if err == nil {
			err = writeLine(conn, replay)
		}
		if err != nil {
			r.lost(err)
			return
		}
		r.lookLater()
		return
	}
	r.flushQueue()
}

// lookLater has the loop look again in a second at messages that wait
// while connected (behind a replay), unless a look is due already.
func (r *relay) lookLater() {
	if len(r.queue) > 0 && r.retry == nil {
		r.retry = time.After(time.Second)
	}
}

// withID is the message line with its id replaced by id.
func withID(line []byte, id json.RawMessage) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, err
	}
	m["id"] = id
	return json.Marshal(m)
}

// lost ends the connection: the requests in flight on it are answered
// with a failure (the daemon may have done them), and the queue waits
// for the next one.
func (r *relay) lost(err error) {
	r.disconnect()
	fmt.Fprintf(r.o.Log, "berth mcp: lost the daemon: %v\n", err)
	for id, method := range r.pending {
		r.answerFailure(json.RawMessage(id), method,
			"unavailable: the berth daemon went away during this call (it may have been done: look before doing it again)")
	}
	clear(r.pending)
	if len(r.queue) > 0 {
		r.retry = time.After(0)
	}
}

// disconnect closes the connection, if any; its reader ends on its own.
func (r *relay) disconnect() {
	if r.conn != nil {
		_ = r.conn.Close()
		r.conn = nil
	}
	r.replaying = ""
}

// expire fails the queued requests older than Wait (dropping the rest
// of what is that old), after err, the last dial's failure.
func (r *relay) expire(err error) {
	cut := time.Now().Add(-r.o.Wait)
	kept := r.queue[:0]
	for _, q := range r.queue {
		if q.at.After(cut) {
			kept = append(kept, q)
			continue
		}
		if q.h.request() {
			r.answerFailure(q.h.ID, q.h.Method, fmt.Sprintf("unavailable: no berth daemon answered on the tools socket within %s: %v", r.o.Wait, err))
		}
	}
	clear(r.queue[len(kept):])
	r.queue = kept
}

// failQueue answers every queued request with msg and drops the rest.
func (r *relay) failQueue(msg string) {
	for _, q := range r.queue {
		if q.h.request() {
			r.answerFailure(q.h.ID, q.h.Method, msg)
		}
	}
	r.queue = nil
}

// errOut is a failed write to the agent, which ends the relay.
var errOut = errors.New("the agent's side of berth mcp is closed")

// answerFailure answers the agent's request id of method with msg: a
// tool call as a tool error (as the server answers a failed call), the
// rest as a JSON-RPC error.
func (r *relay) answerFailure(id json.RawMessage, method, msg string) {
	var answer any
	if method == "tools/call" {
		answer = map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{
			"content": []any{map[string]any{"type": "text", "text": msg}}, "isError": true}}
	} else {
		answer = map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32603, "message": msg}}
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return
	}
	r.made = append(r.made, b)
}

// flushOut writes the answers the relay made to the agent.
func (r *relay) flushOut() error {
	for len(r.made) > 0 {
		b := r.made[0]
		r.made = r.made[1:]
		if err := r.toAgent(b); err != nil {
			return err
		}
	}
	r.made = nil
	return nil
}

// toAgent writes one message to the agent.
func (r *relay) toAgent(line []byte) error {
	if err := writeLine(r.o.Out, line); err != nil {
		return fmt.Errorf("%w: %v", errOut, err)
	}
	return nil
}

// writeLine writes line and its newline in one write.
func writeLine(w io.Writer, line []byte) error {
	b := make([]byte, 0, len(line)+1)
	b = append(append(b, line...), '\n')
	_, err := w.Write(b)
	return err
}

// readAgent reads the agent's messages into fromAgent until its EOF. A
// message past core.ToolsMCPMaxMessage is dropped, and said so.
func (r *relay) readAgent() {
	defer close(r.fromAgent)
	br := bufio.NewReaderSize(r.o.In, 64<<10)
	for {
		line, err := readLine(br)
		if errors.Is(err, errTooLong) {
			fmt.Fprintf(r.o.Log, "berth mcp: dropped a message of more than %d bytes\n", core.ToolsMCPMaxMessage)
			continue
		}
		if len(line) > 0 {
			select {
			case r.fromAgent <- line:
			case <-r.quit:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readDaemon reads connection gen's messages into fromDaemon, then its end.
func (r *relay) readDaemon(gen int, br *bufio.Reader) {
	defer r.readers.Done()
	for {
		line, err := readLine(br)
		if err == nil {
			select {
			case r.fromDaemon <- daemonLine{gen: gen, line: line}:
				continue
			case <-r.quit:
				return
			}
		}
		switch {
		case errors.Is(err, errTooLong):
			err = fmt.Errorf("the daemon sent a message of more than %d bytes", core.ToolsMCPMaxMessage)
		case err == io.EOF && len(line) > 0:
			// A last message without its newline is not a message.
			err = io.ErrUnexpectedEOF
		}
		select {
		case r.fromDaemon <- daemonLine{gen: gen, err: err}:
		case <-r.quit:
		}
		return
	}
}

// errTooLong is a message past core.ToolsMCPMaxMessage.
var errTooLong = errors.New("message too long")

// readLine reads one newline-ended message, without its newline and
// trimmed of a carriage return; blank lines are skipped. A message past
// the bound is read to its end and returned as errTooLong.
func readLine(br *bufio.Reader) ([]byte, error) {
	for {
		var line []byte
		tooLong := false
		for {
			frag, err := br.ReadSlice('\n')
			if !tooLong {
				if len(line)+len(frag) > core.ToolsMCPMaxMessage+1 {
					tooLong, line = true, nil
				} else {
					line = append(line, frag...)
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if tooLong && err == nil {
				return nil, errTooLong
			}
			if err != nil {
				return bytes.TrimRight(line, "\r\n"), err
			}
			break
		}
		if line = bytes.TrimRight(line, "\r\n"); len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
	}
}

// refusal is the daemon's refusal of the upgrade: its error code and message.
type refusal struct {
	status        int
	code, message string
}

// Error is "code: message", as the server words a tool's failure.
func (e *refusal) Error() string { return e.code + ": " + e.message }

// final reports whether dialling again cannot help: the credential is
// not (or no longer) good, or the daemon serves no such route.
func (e *refusal) final() bool {
	return e.code == "unauthenticated" || e.code == "forbidden" || e.code == "not_found"
}

// connect dials the socket and upgrades the connection to the MCP stream.
func (r *relay) connect() (Conn, *bufio.Reader, error) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	conn, err := r.o.Dial(ctx, r.o.Socket)
	if err != nil {
		return nil, nil, err
	}
	br, err := upgrade(conn, r.o.Token)
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return conn, br, nil
}

// upgrade asks for the MCP stream on conn and reads the answer's head,
// within handshakeTimeout; the reader returned holds what followed it.
func upgrade(conn Conn, token string) (*bufio.Reader, error) {
	_ = conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	req := "GET " + core.ToolsMCPPath + " HTTP/1.1\r\nHost: berth\r\nAuthorization: Bearer " + token +
		"\r\nConnection: Upgrade\r\nUpgrade: " + core.ToolsMCPProtocol + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	status, err := br.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("no answer to the upgrade: %w", err)
	}
	code := 0
	if f := strings.Fields(status); len(f) >= 2 && strings.HasPrefix(f[0], "HTTP/1.") {
		code, _ = strconv.Atoi(f[1])
	}
	if code == 0 {
		return nil, fmt.Errorf("the tools socket answered %q", strings.TrimSpace(status))
	}
	length := -1
	for {
		h, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("no answer to the upgrade: %w", err)
		}
		if h = strings.TrimRight(h, "\r\n"); h == "" {
			break
		}
		if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if code != 101 {
		return nil, refusalOf(code, br, length)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return br, nil
}

// refusalOf reads the API's error JSON of a refused upgrade.
func refusalOf(status int, br *bufio.Reader, length int) error {
	e := &refusal{status: status, code: "unavailable", message: fmt.Sprintf("the tools socket answered %d", status)}
	if status == 404 {
		// A daemon of an older berth serves tool calls but no MCP stream:
		// this berth mcp came with an upgrade of the binary it runs.
		e.code, e.message = "not_found", "the daemon serving this session is older than this berth mcp (its tools socket has no "+
			core.ToolsMCPPath+"): restart the daemon (berth serve) to use this berth's"
		return e
	}
	if length <= 0 || length > 64<<10 {
		return e
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(br, body); err != nil {
		return e
	}
	var api struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &api) == nil && api.Error.Code != "" {
		e.code, e.message = api.Error.Code, api.Error.Message
	}
	return e
}
