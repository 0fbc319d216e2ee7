package http

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/berth-sh/berth/internal/core"
)

// mcpInFlight bounds the requests of one MCP stream that the server has
// read and not answered: past it the stream is not read until answers go
// out, so that an agent cannot have the daemon start a goroutine (and
// hold a message) per line it sends.
const mcpInFlight = 16

// mcpWriteTimeout bounds a write to an MCP stream: an agent that does not
// read its answers loses the stream rather than hold the server's writer.
const mcpWriteTimeout = 30 * time.Second

// errBatch is a JSON-RPC batch on an MCP stream: `berth mcp` never sends
// one, and the bound above counts requests a line.
var errBatch = errors.New("the berth MCP stream takes one JSON-RPC message a line, not a batch")

// mcpStream is a hijacked tools-socket connection as the MCP server reads
// and writes it: whole messages of at most maxLine bytes, at most
// mcpInFlight requests unanswered, writes bounded by writeTimeout.
type mcpStream struct {
	conn         net.Conn
	br           *bufio.Reader
	maxLine      int
	writeTimeout time.Duration
	slots        chan struct{} // one per request read and not answered
	closed       chan struct{}
	once         sync.Once

	mu   sync.Mutex
	open map[string]bool // the id keys of those requests
	// rest is what is left of the message being handed to the reader.
	rest []byte
}

// newMCPStream is the stream over conn, whose buffered bytes are br's.
func newMCPStream(conn net.Conn, br *bufio.Reader, maxLine int, writeTimeout time.Duration) *mcpStream {
	return &mcpStream{conn: conn, br: br, maxLine: maxLine, writeTimeout: writeTimeout,
		slots: make(chan struct{}, mcpInFlight), closed: make(chan struct{}), open: map[string]bool{}}
}

// Read hands the server the stream one message at a time, waiting for
// room before a request.
func (s *mcpStream) Read(p []byte) (int, error) {
	if len(s.rest) == 0 {
		line, err := s.readMessage()
		if err != nil {
			return 0, err
		}
		if err := s.admit(line); err != nil {
			return 0, err
		}
		s.rest = line
	}
	n := copy(p, s.rest)
	s.rest = s.rest[n:]
	return n, nil
}

// readMessage reads one newline-ended message, its newline included.
func (s *mcpStream) readMessage() ([]byte, error) {
	var line []byte
	for {
		frag, err := s.br.ReadSlice('\n')
		if len(line)+len(frag) > s.maxLine {
			return nil, fmt.Errorf("an MCP message of more than %d bytes", s.maxLine)
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

// admit counts a request among those in flight, waiting for room; a
// batch ends the stream.
func (s *mcpStream) admit(line []byte) error {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return errBatch
	}
	var h struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(trimmed, &h) != nil || h.Method == "" || len(h.ID) == 0 || string(h.ID) == "null" {
		return nil
	}
	key := core.JSONRPCIDKey(h.ID)
	s.mu.Lock()
	dup := s.open[key]
	s.mu.Unlock()
	if dup {
		// The server refuses a second request of an id in flight.
		return nil
	}
	select {
	case s.slots <- struct{}{}:
	case <-s.closed:
		return net.ErrClosed
	}
	s.mu.Lock()
	s.open[key] = true
	s.mu.Unlock()
	return nil
}

// Write sends one message of the server's within its write timeout; an
// answer frees its request's room.
func (s *mcpStream) Write(p []byte) (int, error) {
	_ = s.conn.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	n, err := s.conn.Write(p)
	if err != nil {
		return n, err
	}
	var h struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(bytes.TrimSpace(p), &h) == nil && h.Method == "" && len(h.ID) > 0 {
		key := core.JSONRPCIDKey(h.ID)
		s.mu.Lock()
		was := s.open[key]
		delete(s.open, key)
		s.mu.Unlock()
		if was {
			<-s.slots
		}
	}
	return n, nil
}

// Close closes the connection; a read waiting for room ends.
func (s *mcpStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.conn.Close()
}
