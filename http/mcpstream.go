package http

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpInFlight bounds the requests of one MCP stream that the server is
// handling: one more is answered at once with an error, so that an agent
// cannot have the daemon start a goroutine (and hold a message) for each
// it sends. The stream is read on meanwhile: an agent that leaves is seen.
const mcpInFlight = 8

// mcpWriteTimeout bounds a write to an MCP stream: an agent that does not
// read its answers loses the stream rather than hold the server's writer.
const mcpWriteTimeout = 30 * time.Second

// mcpWire is a hijacked tools-socket connection as the MCP transport
// reads and writes it: reads from the buffered reader that holds what
// came after the request's head, each write bounded by writeTimeout, and
// the first failed write closes it (a message half written is the last).
type mcpWire struct {
	conn         net.Conn
	br           *bufio.Reader
	writeTimeout time.Duration
}

// Read implements io.Reader.
func (w *mcpWire) Read(p []byte) (int, error) { return w.br.Read(p) }

// Write implements io.Writer.
func (w *mcpWire) Write(p []byte) (int, error) {
	_ = w.conn.SetWriteDeadline(time.Now().Add(w.writeTimeout))
	n, err := w.conn.Write(p)
	if err != nil {
		_ = w.conn.Close()
	}
	return n, err
}

// Close implements io.Closer.
func (w *mcpWire) Close() error { return w.conn.Close() }

// boundedTransport is an MCP transport whose connection holds at most
// mcpInFlight requests (boundedConn).
type boundedTransport struct {
	mcp.Transport
}

// Connect implements mcp.Transport.
func (t boundedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &boundedConn{Connection: c, open: map[jsonrpc.ID]bool{}}, nil
}

// boundedConn counts the requests it hands the server until their answers
// go out, by the server's own ids; past mcpInFlight, or for an id already
// in flight, it answers a request itself and hands it on no further.
type boundedConn struct {
	mcp.Connection
	// wmu lets one answer at a time be written (Write).
	wmu  sync.Mutex
	mu   sync.Mutex
	open map[jsonrpc.ID]bool
	// writing is the request whose answer is being written (the zero ID
	// when none): the agent may have read that answer already and sent
	// the next request, so it no longer counts against the bound.
	writing jsonrpc.ID
}

// Read implements mcp.Connection.
func (c *boundedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.ID.IsValid() {
			return msg, nil
		}
		refusal := c.admit(req.ID)
		if refusal == "" {
			return msg, nil
		}
		answer := &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: -32000, Message: refusal}}
		if err := c.Connection.Write(ctx, answer); err != nil {
			return nil, err
		}
	}
}

// admit counts a request in, or says why not.
func (c *boundedConn) admit(id jsonrpc.ID) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.open)
	if c.open[c.writing] {
		n--
	}
	switch {
	case c.open[id]:
		return fmt.Sprintf("rate_limited: request %v is in flight already", id.Raw())
	case n >= mcpInFlight:
		return fmt.Sprintf("rate_limited: more than %d requests in flight on this stream", mcpInFlight)
	}
	c.open[id] = true
	return ""
}

// Write implements mcp.Connection: an answer frees its request's room as
// it is written (one waiting to be written still holds it). Answers go
// out one at a time, so at most one request more than mcpInFlight is held.
func (c *boundedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return c.Connection.Write(ctx, msg)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	c.writing = resp.ID
	c.mu.Unlock()
	err := c.Connection.Write(ctx, msg)
	c.mu.Lock()
	delete(c.open, resp.ID)
	c.writing = jsonrpc.ID{}
	c.mu.Unlock()
	return err
}
