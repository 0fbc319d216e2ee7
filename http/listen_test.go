package http

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/internal/testenv"
)

// socketDir returns a short temporary directory for Unix sockets (their
// paths are limited to 107 bytes).
func socketDir(t *testing.T) string {
	t.Helper()
	dir := testenv.ShortTempDir(t, "bh")
	return dir
}

// testToken is the TCP token of the test servers that set none.
const testToken = "test-token-0123456789"

// startServer listens on a loopback port (and socketPath unless "") and
// serves until the test ends. Its token is testToken unless opts sets one.
func startServer(t *testing.T, svc berth.SessionService, opts ServerOptions, socketPath string) *Server {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	s := NewServer(svc, opts)
	if err := s.Listen("127.0.0.1:0", socketPath); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	serveServer(t, s)
	return s
}

// serveTCP returns a server for svc bound to a loopback port and serving
// in the background: Serve's result arrives on the channel once s is
// closed, which is the caller's to do.
func serveTCP(tb testing.TB, svc berth.SessionService, opts ServerOptions) (*Server, <-chan error) {
	tb.Helper()
	s := NewServer(svc, opts)
	if err := s.Listen("127.0.0.1:0", ""); err != nil {
		tb.Fatal(err)
	}
	return s, serveAsync(s)
}

// serveAsync runs s.Serve in the background; its result arrives on the
// channel.
func serveAsync(s *Server) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	return done
}

// serveServer runs s.Serve until the test ends, then closes s.
func serveServer(t *testing.T, s *Server) {
	t.Helper()
	done := serveAsync(s)
	t.Cleanup(func() {
		closeErr, serveErr := closeServer(s, done, 5*time.Second)
		if closeErr != nil || serveErr != nil {
			t.Errorf("Close: %v; Serve: %v", closeErr, serveErr)
		}
	})
}

// closeServer closes s, giving it within, and returns what Close and then
// Serve (whose result comes on done) returned.
func closeServer(s *Server, done <-chan error, within time.Duration) (closeErr, serveErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	closeErr = s.Close(ctx)
	return closeErr, <-done
}

func TestListenRefusesTCPWithoutToken(t *testing.T) {
	// Since v2 no TCP address is served without a token, loopback included.
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "0.0.0.0:0"} {
		s := NewServer(newFakeService(), ServerOptions{})
		err := s.Listen(addr, "")
		if berth.ErrorCode(err) != berth.EInvalid || !strings.Contains(berth.ErrorMessage(err), "token") || s.Addr() != "" {
			t.Errorf("Listen(%q) without token = %v, bound %q; want invalid_argument", addr, err, s.Addr())
		}
		s.Close(context.Background())
	}
}

func TestListenLoopbackWithoutTokenOnlyOnLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0"} {
		s := NewServer(newFakeService(), ServerOptions{LoopbackWithoutToken: true})
		err := s.Listen(addr, "")
		if berth.ErrorCode(err) != berth.EInvalid || !strings.Contains(berth.ErrorMessage(err), "[server] token") {
			t.Errorf("Listen(%q) without token = %v, want invalid_argument naming [server] token", addr, err)
		}
		if s.Addr() != "" {
			t.Errorf("Listen(%q) bound %s", addr, s.Addr())
		}
		s.Close(context.Background())
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		s := NewServer(newFakeService(), ServerOptions{LoopbackWithoutToken: true})
		if err := s.Listen(addr, ""); err != nil {
			t.Errorf("Listen(%q) = %v", addr, err)
		}
		s.Close(context.Background())
	}
	s := NewServer(newFakeService(), ServerOptions{Token: "t"})
	if err := s.Listen("0.0.0.0:0", ""); err != nil {
		t.Errorf("Listen(0.0.0.0:0) with a token = %v", err)
	}
	s.Close(context.Background())
}

func TestSocketModeAndCleanup(t *testing.T) {
	sock := filepath.Join(socketDir(t), "berth.sock")
	s := NewServer(newFakeService(), ServerOptions{})
	if err := s.Listen("", sock); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with 0600", fi.Mode())
	}
	// Only the socket is left in its directory.
	entries, _ := os.ReadDir(filepath.Dir(sock))
	if len(entries) != 1 {
		t.Errorf("socket directory holds %d entries", len(entries))
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	c := unixClient(sock, "")
	defer c.Close()
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatalf("health over the socket: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still there after Close: %v", err)
	}
}

func TestSocketStaleLiveAndForeign(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "berth.sock")

	// A socket file nothing answers on is replaced.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	live := NewServer(newFakeService(), ServerOptions{})
	if err := live.Listen("", sock); err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer live.Close(context.Background())

	// A socket a daemon answers on is refused, and left alone.
	other := NewServer(newFakeService(), ServerOptions{Token: testToken})
	err = other.Listen("127.0.0.1:0", sock)
	if berth.ErrorCode(err) != berth.EConflict {
		t.Errorf("Listen over a live socket = %v, want conflict", err)
	}
	if other.Addr() != "" {
		t.Errorf("the TCP listener stayed open after the socket failed")
	}
	other.Close(context.Background())
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("live socket was removed: %v", err)
	}

	// A path that is not a socket is never removed.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	third := NewServer(newFakeService(), ServerOptions{})
	if err := third.Listen("", file); berth.ErrorCode(err) != berth.EConflict {
		t.Errorf("Listen over a regular file = %v, want conflict", err)
	}
	third.Close(context.Background())
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Errorf("regular file changed: %q", b)
	}
}

func TestAuthOverTCPAndSocket(t *testing.T) {
	sock := filepath.Join(socketDir(t), "berth.sock")
	s := startServer(t, newFakeService(), ServerOptions{Token: "s3cret"}, sock)
	ctx := context.Background()
	clients := map[string]func(token string) *client.Client{
		"tcp":  func(tok string) *client.Client { return tcpClient("http://"+s.Addr(), tok) },
		"unix": func(tok string) *client.Client { return unixClient(sock, tok) },
	}
	for _, tok := range []string{"", "wrong"} {
		c := clients["tcp"](tok)
		_, err := c.Health(ctx)
		if berth.ErrorCode(err) != berth.EUnauthenticated {
			t.Errorf("tcp with token %q: %v, want unauthenticated", tok, err)
		}
		c.Close()
	}
	// The socket's file mode is its check: no token needed.
	if c := clients["unix"](""); true {
		if _, err := c.Health(ctx); err != nil {
			t.Errorf("unix without a token: %v", err)
		}
		c.Close()
	}
	for name, mk := range clients {
		c := mk("s3cret")
		if _, err := c.Health(ctx); err != nil {
			t.Errorf("%s with the token: %v", name, err)
		}
		c.Close()
	}
	// A raw request without a header gets a 401 status.
	resp, err := http.Get("http://" + s.Addr() + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != 401 {
		t.Errorf("no token over TCP = %d", resp.StatusCode)
	}
}

func TestServeLifecycle(t *testing.T) {
	s := NewServer(newFakeService(), ServerOptions{Token: testToken})
	if err := s.Serve(); err == nil {
		t.Error("Serve before Listen succeeded")
	}
	if err := s.Listen("", ""); berth.ErrorCode(err) != berth.EInvalid {
		t.Errorf("Listen with nothing = %v", err)
	}
	if err := s.Listen("127.0.0.1:0", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Listen("127.0.0.1:0", ""); berth.ErrorCode(err) != berth.EConflict {
		t.Errorf("second Listen = %v", err)
	}
	// Close without Serve releases the listener; Serve after Close returns.
	addr := s.Addr()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Errorf("Serve after Close = %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("listener still accepts after Close")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}
