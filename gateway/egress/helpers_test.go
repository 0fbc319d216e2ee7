package egress_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway/egress"
	"github.com/berth-sh/berth/internal/testenv"
)

// deadline bounds every wait of these tests.
const deadline = 10 * time.Second

// echoServer is a TCP server on the loopback that echoes what it reads
// and, at the client's EOF, writes "bye" and closes.
type echoServer struct {
	ln       net.Listener
	accepted atomic.Int32
}

// newEcho starts an echo server, stopped at the test's end.
func newEcho(t testing.TB) *echoServer {
	t.Helper()
	ln := listen(t)
	e := &echoServer{ln: ln}
	testenv.Serve(t, ln, func(c net.Conn) {
		e.accepted.Add(1)
		// Longer than any wait of a test: its end is never what a test sees.
		c.SetDeadline(time.Now().Add(3 * deadline))
		if _, err := io.Copy(c, c); err == nil {
			io.WriteString(c, "bye")
		}
	})
	return e
}

// port returns the server's port.
func (e *echoServer) port() int { return e.ln.Addr().(*net.TCPAddr).Port }

// addr returns the server's "127.0.0.1:port".
func (e *echoServer) addr() string { return e.ln.Addr().String() }

// fakeNet is a resolver and dialer: names resolve as names says, and a
// dial to an address of routes goes to the real address there. It
// records the names looked up and the addresses dialed.
type fakeNet struct {
	names  map[string][]netip.Addr
	routes map[string]string

	mu      sync.Mutex
	lookups []string
	dials   []string
}

func (f *fakeNet) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups = append(f.lookups, host)
	if a, ok := f.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (f *fakeNet) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	f.mu.Lock()
	f.dials = append(f.dials, address)
	real, ok := f.routes[address]
	f.mu.Unlock()
	if !ok {
		real = address
	}
	var d net.Dialer
	return d.DialContext(ctx, network, real)
}

// seen returns copies of the names looked up and the addresses dialed.
func (f *fakeNet) seen() (lookups, dials []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lookups...), append([]string(nil), f.dials...)
}

// newClock is a settable clock for the coalescing window.
func newClock() *testenv.Clock { return testenv.NewClock(time.Unix(1_700_000_000, 0)) }

// denials records what Hooks.Denied was told.
type denials struct {
	mu   sync.Mutex
	told []string
}

func (d *denials) hook(sessionID, host string, port int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.told = append(d.told, fmt.Sprintf("%s %s", sessionID, net.JoinHostPort(host, strconv.Itoa(port))))
}

func (d *denials) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.told...)
}

// allowList is an allow-list policy.
func allowList(ask bool, entries ...string) berth.NetworkPolicy {
	return berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: entries, Ask: ask}
}

// served is a session's proxy served on a loopback listener.
type served struct {
	*egress.Session
	proxy *egress.Proxy
	addr  string
}

// serve makes session "ses_1" of a new Proxy with opts and serves it;
// the test's end closes it and checks that Serve returned nil.
func serve(t testing.TB, opts egress.Options, policy berth.NetworkPolicy, hooks egress.Hooks) served {
	t.Helper()
	p := egress.New(opts)
	s, err := p.Session("ses_1", policy, hooks)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		p.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(deadline):
			t.Error("Serve did not return after Close")
		}
	})
	return served{Session: s, proxy: p, addr: ln.Addr().String()}
}

// tunnelConn is a client's connection to the proxy after a CONNECT.
type tunnelConn struct {
	net.Conn
	r      *bufio.Reader
	status int
	body   string
}

// connect asks the proxy at addr to CONNECT to target and reads its
// answer; a 200's connection is the tunnel. The connection is closed at
// the test's end.
func connect(t *testing.T, addr, target string) *tunnelConn {
	t.Helper()
	tc, err := dialConnect(addr, target)
	if tc != nil {
		t.Cleanup(func() { tc.Close() })
	}
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return tc
}

// dialConnect is connect for any goroutine: the caller closes the
// connection, which is returned with any error after the dial.
func dialConnect(addr, target string) (*tunnelConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(deadline))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	r := bufio.NewReader(c)
	tc := &tunnelConn{Conn: c, r: r}
	resp, err := http.ReadResponse(r, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return tc, err
	}
	tc.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		tc.body = string(b)
	}
	return tc, nil
}

// pendingConnect is a connect running on its own goroutine.
type pendingConnect struct {
	done chan struct{}
	tc   *tunnelConn
	err  error
}

// connectAsync starts a connect on a goroutine of its own, which the
// test's end waits for.
func connectAsync(t *testing.T, addr, target string) *pendingConnect {
	p := &pendingConnect{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.tc, p.err = dialConnect(addr, target)
	}()
	t.Cleanup(func() {
		<-p.done
		if p.tc != nil {
			p.tc.Close()
		}
	})
	return p
}

// wait returns the connect's answer, failing after the deadline.
func (p *pendingConnect) wait(t *testing.T) *tunnelConn {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(deadline):
		t.Fatal("CONNECT was not answered")
	}
	if p.err != nil {
		t.Fatalf("CONNECT: %v", p.err)
	}
	return p.tc
}

// listen returns a loopback listener, closed at the test's end.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// roundTrip writes msg into the tunnel and reads as many bytes back.
func (tc *tunnelConn) roundTrip(t *testing.T, msg string) {
	t.Helper()
	if _, err := io.WriteString(tc, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(tc.r, got); err != nil || string(got) != msg {
		t.Fatalf("echo of %q: %q, %v", msg, got, err)
	}
}

// wantStatus fails unless the CONNECT was answered status.
func (tc *tunnelConn) wantStatus(t *testing.T, status int, bodyHas ...string) {
	t.Helper()
	if tc.status != status {
		t.Fatalf("status %d (%q), want %d", tc.status, tc.body, status)
	}
	for _, s := range bodyHas {
		if !strings.Contains(tc.body, s) {
			t.Errorf("body %q does not say %q", tc.body, s)
		}
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, deadline, what, cond)
}

// closedByPeer reports whether reading from r ends (EOF or reset) rather
// than times out within the deadline.
func closedByPeer(c net.Conn, r io.Reader) bool {
	c.SetReadDeadline(time.Now().Add(deadline))
	_, err := io.Copy(io.Discard, r)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}
