package http

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// dribble opens a TCP connection to addr and sends the headers of a POST
// whose body is 1000 bytes, then only its first bytes, and leaves it there.
func dribble(t *testing.T, addr string, token string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"agent\":", auth)
	return c
}

// readAnswer reads what the server sends on c until it closes c, within
// the deadline; it fails the test when the connection stays open.
func readAnswer(t *testing.T, c net.Conn, within time.Duration) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the connection was still open after %s (read %q): %v", within, b, err)
	}
	return string(b)
}

func TestSlowBodyIsCutAtTheDeadline(t *testing.T) {
	f := newFakeService()
	s := startServer(t, f, ServerOptions{BodyTimeout: 300 * time.Millisecond}, "")
	// With the token: the body read times out, 408, the connection closes.
	if got := readAnswer(t, dribble(t, s.Addr(), testToken), 10*time.Second); !strings.HasPrefix(got, "HTTP/1.1 408") {
		t.Errorf("slow body with the token: %q, want a 408", got)
	}
	// Without: refused at once, and the unread body is not waited for.
	if got := readAnswer(t, dribble(t, s.Addr(), ""), 10*time.Second); !strings.HasPrefix(got, "HTTP/1.1 401") {
		t.Errorf("slow body without the token: %q, want a 401", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls != 0 || len(f.sessions) != 1 {
		t.Errorf("a body that never arrived reached the service: %d calls, %d sessions", f.calls, len(f.sessions))
	}
}

// waitPrompt sends a prompt with ?wait=true in the background and returns
// where its answer (or error) arrives.
func waitPrompt(t *testing.T, s *Server) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	c := tcpClient("http://"+s.Addr(), testToken)
	t.Cleanup(c.Close)
	go func() {
		_, err := c.PromptWait(context.Background(), "ses_1", berth.PromptRequest{Text: "hi"})
		done <- err
	}()
	return done
}

func TestLongPollOutlivesTheBodyDeadline(t *testing.T) {
	f := newFakeService()
	f.waitBlocks, f.waitRelease = true, make(chan struct{})
	s := startServer(t, f, ServerOptions{BodyTimeout: 100 * time.Millisecond, PingInterval: 100 * time.Millisecond}, "")
	done := waitPrompt(t, s)
	// Five pings on a stream take five body deadlines: both requests outlive them.
	resp := openStream(t, s, "/v1/sessions/ses_1/events/stream")
	r := bufio.NewReader(resp.Body)
	for pings := 0; pings < 5; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the SSE stream ended after %d pings: %v", pings, err)
		}
		if strings.HasPrefix(line, ": ping") {
			pings++
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the long poll ended before its turn: %v", err)
	default:
	}
	close(f.waitRelease)
	if err := <-done; err != nil {
		t.Errorf("the long poll: %v", err)
	}
}

func TestSlowClientFloodKeepsHealthAnswering(t *testing.T) {
	const max = 8
	f := newFakeService()
	f.waitBlocks, f.waitRelease = true, make(chan struct{})
	s := startServer(t, f, ServerOptions{MaxConnections: max, BodyTimeout: time.Minute}, "")
	// A request being worked on is never shed.
	done := waitPrompt(t, s)
	awaitWaitTurn(t, f, "the long poll")
	// Four times the cap of slow clients, with and without the token.
	var conns []net.Conn
	for i := range 4 * max {
		tok := ""
		if i%2 == 0 {
			tok = testToken
		}
		conns = append(conns, dribble(t, s.Addr(), tok))
	}
	// A fresh client still gets its answer.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+s.Addr()+"/v1/health", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("health under a slow-client flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("health under a flood = %d", resp.StatusCode)
	}
	if n := s.tcp.open(); n > max {
		t.Errorf("%d connections open, cap %d", n, max)
	}
	if s.tcp.shed.Load() == 0 {
		t.Error("no connection was shed")
	}
	close(f.waitRelease)
	if err := <-done; err != nil {
		t.Errorf("the long poll was cut by the flood: %v", err)
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
}

// The connection cap stays under half the open-file limit, whatever the
// config says, so that the daemon keeps descriptors for its own work.
func TestMaxConnectionsStaysUnderTheFileLimit(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = 200
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	if got := NewServer(newFakeService(), ServerOptions{MaxConnections: 512}).maxConnections(); got != 100 {
		t.Errorf("cap with 200 files = %d, want 100", got)
	}
	if got := NewServer(newFakeService(), ServerOptions{MaxConnections: 50}).maxConnections(); got != 50 {
		t.Errorf("cap under the limit = %d, want 50", got)
	}
}

// flood opens n connections with a tiny receive buffer, sends each `reqs`
// pipelined GETs of a 13 KB UI file (with the token when auth is set) and
// never reads an answer: each connection ends up with its handler stuck
// writing. The connections close when the test ends.
func flood(t *testing.T, addr string, n, reqs int, auth bool) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	req := "GET /ui/js/transcript.js HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	if auth {
		req += "Authorization: Bearer " + testToken + "\r\n"
	}
	batch := strings.Repeat(req+"\r\n", reqs)
	var wg sync.WaitGroup
	var conns []net.Conn
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		// The server reads the next request only once it answered the
		// last, so this write blocks; it ends when the connection closes.
		wg.Go(func() { io.WriteString(c, batch) })
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	})
}

// waitStuck waits until n of s's TCP connections have had a write blocked
// for a while: clients that stopped reading.
func waitStuck(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		stuck := 0
		s.tcp.mu.Lock()
		for c := range s.tcp.conns {
			if since := c.writingSince.Load(); since != 0 && time.Since(time.Unix(0, since)) > 50*time.Millisecond {
				stuck++
			}
		}
		s.tcp.mu.Unlock()
		if stuck >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d flood connections got stuck writing", stuck, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// healthWithin polls GET /v1/health with the token on fresh connections
// until one answers 200, and fails the test when none did within d.
func healthWithin(t *testing.T, s *Server, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		tr := &http.Transport{}
		hc := &http.Client{Timeout: 2 * time.Second, Transport: tr}
		req, _ := http.NewRequest("GET", "http://"+s.Addr()+"/v1/health", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := hc.Do(req)
		tr.CloseIdleConnections()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("health with the token never answered 200 within %s: %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Review finding: clients without a token that pipeline UI file requests
// and never read the answers kept every connection busy, and the API
// refused everyone. A public path never makes its connection busy, so they
// are shed.
func TestNonReadingAssetFloodKeepsTheAPIAnswering(t *testing.T) {
	const max = 8
	s := startServer(t, newFakeService(), ServerOptions{MaxConnections: max}, "")
	flood(t, s.Addr(), max, 1000, false)
	waitStuck(t, s, max)
	healthWithin(t, s, 10*time.Second)
}

// A client with the token that stops reading holds its place only until a
// write has been stuck for the write timeout: then it is cut or shed.
func TestNonReadingTokenClientIsCutAfterTheWriteTimeout(t *testing.T) {
	const max = 8
	s := startServer(t, newFakeService(), ServerOptions{MaxConnections: max, WriteTimeout: 2 * time.Second}, "")
	flood(t, s.Addr(), max, 1000, true)
	// Every slot is held by a token client stuck writing to: the write
	// timeout (2 s, long enough for the stuck state to be seen on a loaded
	// machine) must cut them so that health answers.
	waitStuck(t, s, max)
	healthWithin(t, s, 20*time.Second)
}
