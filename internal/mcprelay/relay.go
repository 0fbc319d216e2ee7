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

// handshakeTimeout bounds a dial and its upgrade, and the answer to a
// replayed initialize.
const handshakeTimeout = 10 * time.Second

// drainTimeout is how long a connection a write failed on is still read
// (the daemon's answers already sent) before it is given up.
const drainTimeout = time.Second

// Backoff of the dials while messages wait: at once, then from minBackoff
// doubling to maxBackoff, until a connection carries a message.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
)

// Conn is a connection to the tools socket.
type Conn interface {
	io.ReadWriteCloser
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
}

// writeTimeout bounds a write to the daemon: one that does not read is
// given up (its connection drained) rather than stall the relay.
const writeTimeout = 10 * time.Second

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

// Run relays until the agent's side ends and what it asked before is
// answered (nil), or until that side cannot be written to.
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
	r := &relay{o: o, pending: map[string]sent{}, fromAgent: make(chan []byte), fromDaemon: make(chan daemonLine),
		dialed: make(chan dialResult), quit: make(chan struct{})}
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		r.readAgent()
	}()
	err := r.loop()
	close(r.quit)
	r.disconnect()
	r.helpers.Wait()
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
	dialed     chan dialResult
	quit       chan struct{} // closed when loop has ended
	// helpers counts the connections' readers and the dials, which end
	// with them (or at quit).
	helpers sync.WaitGroup

	conn    Conn
	gen     int  // the connection's number: lines of an older one are stale
	dialing bool // a dial is under way
	// pending are the agent's requests sent on conn, by id key.
	pending map[string]sent
	// queue holds the agent's messages while there is no connection (or
	// it is being replayed to, or drained), oldest first.
	queue []queued
	// initLine and initializedLine are the agent's initialize request and
	// initialized notification, replayed to each new connection once
	// initialized says the first was answered by a daemon.
	initLine, initializedLine []byte
	initialized               bool
	// replaying is the id key of the replayed initialize awaiting its
	// answer since replayedAt; "" when none is.
	replaying  string
	replayedAt time.Time
	// drainBy, when set, is when a connection a write failed on is given up.
	drainBy  time.Time
	drainErr error
	// retry fires the next dial; nil when none is due.
	retry   <-chan time.Time
	backoff time.Duration
	// tick fires every second while messages wait, a replay is answered
	// or a connection drained; nil otherwise.
	tick <-chan time.Time
	// made are the answers the relay made itself, for flushOut to write.
	made [][]byte
}

// sent is one of the agent's requests on the connection.
type sent struct {
	id     json.RawMessage
	method string
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

// dialResult is a dial's connection, or why there is none.
type dialResult struct {
	conn Conn
	br   *bufio.Reader
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

// loop is the relay's one goroutine of state.
func (r *relay) loop() error {
	fromAgent := r.fromAgent
	for {
		select {
		case line, ok := <-fromAgent:
			if !ok {
				// The agent sends no more; what it asked is still answered.
				fromAgent = nil
				break
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
		case d := <-r.dialed:
			r.dialing = false
			r.connected(d)
		case <-r.retry:
			r.retry = nil
			r.dial()
		case <-r.tick:
			r.tick = nil
			r.housekeep()
		}
		if err := r.flushOut(); err != nil {
			return err
		}
		if fromAgent == nil && len(r.pending) == 0 && len(r.queue) == 0 {
			return nil
		}
		r.schedule()
	}
}

// fromTheAgent sends (or queues) one of the agent's messages; what is not
// one JSON-RPC message is answered here, never sent.
func (r *relay) fromTheAgent(line []byte) {
	trimmed := bytes.TrimSpace(line)
	switch {
	case bytes.Equal(line, tooLong):
		r.answerNull(-32600, fmt.Sprintf("a message of more than %d bytes was dropped", core.ToolsMCPMaxMessage))
		return
	case len(trimmed) > 0 && trimmed[0] == '[':
		r.answerNull(-32600, "berth mcp takes one JSON-RPC message a line, not a batch")
		return
	case !json.Valid(trimmed):
		r.answerNull(-32700, "not a JSON-RPC message: not JSON")
		return
	}
	var h header
	if json.Unmarshal(trimmed, &h) != nil {
		r.answerNull(-32600, "not a JSON-RPC message: not a JSON object")
		return
	}
	switch {
	case h.Method == "initialize" && h.request():
		r.initLine = line
	case h.Method == "notifications/initialized":
		r.initializedLine = line
	}
	q := queued{line: line, h: h, at: time.Now()}
	if !r.ready() {
		r.queue = append(r.queue, q)
		return
	}
	if err := r.send(q); err != nil {
		r.queue = append(r.queue, q)
		r.writeFailed(err)
	}
}

// ready reports whether the agent's messages may go on the connection now.
func (r *relay) ready() bool {
	return r.conn != nil && r.replaying == "" && r.drainBy.IsZero()
}

// send writes one of the agent's messages on the connection.
func (r *relay) send(q queued) error {
	if err := r.write(q.line); err != nil {
		return err
	}
	if q.h.request() {
		r.pending[idKey(q.h.ID)] = sent{id: q.h.ID, method: q.h.Method}
	}
	return nil
}

// write writes a line on the connection within writeTimeout.
func (r *relay) write(line []byte) error {
	_ = r.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return writeLine(r.conn, line)
}

// writeFailed stops writing on a connection a write failed on; its reader
// goes on until the daemon's answers already sent are read (its end), or
// drainTimeout.
func (r *relay) writeFailed(err error) {
	if r.drainBy.IsZero() {
		r.drainBy, r.drainErr = time.Now().Add(drainTimeout), err
	}
}

// fromTheDaemon passes one of the server's messages to the agent, but
// for the answer to a replayed initialize.
func (r *relay) fromTheDaemon(line []byte) error {
	// The connection carries messages: dials start at once again.
	r.backoff = 0
	h := parseHeader(line)
	key := ""
	if h.response() {
		key = idKey(h.ID)
	}
	if r.replaying != "" && key == r.replaying {
		r.replayAnswered(line)
		return nil
	}
	if key != "" {
		if s, ok := r.pending[key]; ok && s.method == "initialize" && answered(line) {
			r.initialized = true
		}
		delete(r.pending, key)
	}
	return r.toAgent(line)
}

// answered reports whether a response is a result, not an error.
func answered(line []byte) bool {
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	return json.Unmarshal(line, &m) == nil && len(m.Result) > 0
}

// replayAnswered takes the daemon's answer to a replayed initialize: the
// agent's initialized and the queue follow it, or, when the daemon
// refused, the waiting calls fail.
func (r *relay) replayAnswered(line []byte) {
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
		return
	}
	if r.initializedLine != nil && !r.queued("notifications/initialized") {
		if err := r.send(queued{line: r.initializedLine, h: parseHeader(r.initializedLine)}); err != nil {
			r.writeFailed(err)
			return
		}
	}
	r.flushQueue()
}

// queued reports whether a message of method waits in the queue.
func (r *relay) queued(method string) bool {
	for _, q := range r.queue {
		if q.h.Method == method {
			return true
		}
	}
	return false
}

// flushQueue sends the queued messages, in order, while it may.
func (r *relay) flushQueue() {
	for len(r.queue) > 0 && r.ready() {
		if err := r.send(r.queue[0]); err != nil {
			// It stays first, with its age, for the next connection.
			r.writeFailed(err)
			return
		}
		r.queue[0] = queued{}
		r.queue = r.queue[1:]
	}
	if len(r.queue) == 0 {
		r.queue = nil
	}
}

// dial starts a dial of the daemon, unless one is under way.
func (r *relay) dial() {
	if r.dialing || r.conn != nil {
		return
	}
	r.dialing = true
	r.helpers.Add(1)
	go func() {
		defer r.helpers.Done()
		conn, br, err := connect(r.o)
		select {
		case r.dialed <- dialResult{conn: conn, br: br, err: err}:
		case <-r.quit:
			if conn != nil {
				_ = conn.Close()
			}
		}
	}()
}

// connected takes a dial's outcome: on a connection, the agent's
// initialization is replayed or the queue sent; on failure the messages
// that waited too long fail, and a refusal that will not change fails
// them all.
func (r *relay) connected(d dialResult) {
	if d.err != nil {
		var refused *refusal
		if errors.As(d.err, &refused) && refused.final() {
			r.failQueue(refused.Error())
			return
		}
		r.expire(d.err)
		return
	}
	r.conn = d.conn
	r.gen++
	r.helpers.Add(1)
	go r.readDaemon(r.gen, d.br)
	// An agent initializing again (its initialize is queued) is not replayed to.
	if r.initialized && r.initLine != nil && !r.queued("initialize") {
		id := strconv.Quote("berth-mcp-replay-" + strconv.Itoa(r.gen))
		replay, err := withID(r.initLine, json.RawMessage(id))
		if err == nil {
			err = r.write(replay)
		}
		if err != nil {
			r.writeFailed(err)
			return
		}
		r.replaying, r.replayedAt = idKey([]byte(id)), time.Now()
		return
	}
	r.flushQueue()
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
// with a failure (the daemon may have done them); the queue waits for
// the next one.
func (r *relay) lost(err error) {
	r.disconnect()
	fmt.Fprintf(r.o.Log, "berth mcp: lost the daemon: %v\n", err)
	for _, s := range r.pending {
		if s.method == "initialize" {
			// Never answered: the agent may initialize again, and that
			// one goes as it is, not after a replay.
			r.initialized = false
		}
		r.answerFailure(s.id, s.method,
			"unavailable: the berth daemon went away during this call (it may have been done: look before doing it again)")
	}
	clear(r.pending)
	r.expire(err)
}

// disconnect closes the connection, if any; its reader ends on its own.
func (r *relay) disconnect() {
	if r.conn != nil {
		_ = r.conn.Close()
		r.conn = nil
	}
	r.replaying = ""
	r.drainBy, r.drainErr = time.Time{}, nil
}

// housekeep is the once-a-second look while messages wait: a drained
// connection or an unanswered replay is given up, and the messages that
// waited too long fail.
func (r *relay) housekeep() {
	switch {
	case !r.drainBy.IsZero() && time.Now().After(r.drainBy):
		r.lost(r.drainErr)
	case r.replaying != "" && time.Since(r.replayedAt) > handshakeTimeout:
		r.lost(errors.New("the daemon did not answer the session's initialize again"))
	default:
		r.expire(errors.New("waiting for the daemon"))
	}
}

// schedule arms the timers the state needs: a dial while messages wait
// with no connection, the look while anything waits.
func (r *relay) schedule() {
	waiting := len(r.queue) > 0
	if waiting && r.conn == nil && !r.dialing && r.retry == nil {
		delay := r.backoff
		r.backoff = min(max(2*r.backoff, minBackoff), maxBackoff)
		if delay == 0 {
			r.dial()
		} else {
			r.retry = time.After(delay)
		}
	}
	if (waiting || r.replaying != "" || !r.drainBy.IsZero()) && r.tick == nil {
		r.tick = time.After(time.Second)
	}
}

// expire fails the queued requests older than Wait (dropping the rest
// of what is that old), after err, the last reason they could not go.
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
	r.make(answer)
}

// answerNull answers a message the relay could not read (it has no id).
func (r *relay) answerNull(code int, msg string) {
	r.make(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
}

// make keeps an answer for flushOut.
func (r *relay) make(answer any) {
	if b, err := json.Marshal(answer); err == nil {
		r.made = append(r.made, b)
	}
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

// parseHeader reads a message's header; the zero header when it has none.
func parseHeader(line []byte) header {
	var h header
	_ = json.Unmarshal(line, &h)
	return h
}

// readAgent reads the agent's messages into fromAgent until its EOF. A
// message past core.ToolsMCPMaxMessage is dropped, answered and said so.
func (r *relay) readAgent() {
	defer close(r.fromAgent)
	br := bufio.NewReaderSize(r.o.In, 64<<10)
	for {
		line, err := readLine(br)
		if errors.Is(err, errTooLong) {
			fmt.Fprintf(r.o.Log, "berth mcp: dropped a message of more than %d bytes\n", core.ToolsMCPMaxMessage)
			line, err = tooLong, nil
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
	defer r.helpers.Done()
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

// tooLong stands for a message of the agent's that readAgent dropped.
var tooLong = []byte{0}

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
	code, message string
}

// Error is "code: message", as the server words a tool's failure.
func (e *refusal) Error() string { return e.code + ": " + e.message }

// final reports whether dialling again cannot help: the credential is
// not (or no longer) good, or the daemon serves no such route.
func (e *refusal) final() bool {
	return e.code == "unauthenticated" || e.code == "forbidden" || e.code == "not_found"
}

// connect dials the socket and upgrades the connection to the MCP
// stream, all within handshakeTimeout.
func connect(o Options) (Conn, *bufio.Reader, error) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	conn, err := o.Dial(ctx, o.Socket)
	if err != nil {
		return nil, nil, err
	}
	deadline, _ := ctx.Deadline()
	br, err := upgrade(conn, o.Token, deadline)
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return conn, br, nil
}

// upgrade asks for the MCP stream on conn and reads the answer's head by
// deadline; the reader returned holds what followed it.
func upgrade(conn Conn, token string, deadline time.Time) (*bufio.Reader, error) {
	_ = conn.SetReadDeadline(deadline)
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
	e := &refusal{code: "unavailable", message: fmt.Sprintf("the tools socket answered %d", status)}
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

// idKey is a JSON-RPC request id as a map key, the same however
// the id was spelled, and as the MCP SDK answers it: a number by its
// integer part (1, 1.0 and 1.5 are one id: the SDK answers 1.5 as 1), a
// string by its text ("a" and "\u0061" are one id). Anything else is
// kept as written.
func idKey(raw []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "?" + string(raw)
	}
	switch v := v.(type) {
	case string:
		return "s" + v
	case json.Number:
		if n, err := strconv.ParseFloat(string(v), 64); err == nil {
			return "n" + strconv.FormatInt(int64(n), 10)
		}
		return "n" + string(v)
	}
	return "?" + string(raw)
}
