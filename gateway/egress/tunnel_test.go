package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway/egress"
	"github.com/berth-sh/berth/internal/testenv"
)

func TestConnectToAnAddressEntryCarriesBytesBothWaysAndHalfCloses(t *testing.T) {
	echo := newEcho(t)
	s := serve(t, egress.Options{}, allowList(false, echo.addr()), egress.Hooks{})
	tc := connect(t, s.addr, echo.addr())
	tc.wantStatus(t, http.StatusOK)
	tc.roundTrip(t, "hello")
	tc.roundTrip(t, string(make([]byte, 100<<10)))
	// The client's EOF reaches the server, whose answer still comes back.
	if err := tc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(tc.r)
	if err != nil || string(rest) != "bye" {
		t.Fatalf("after the half-close: %q, %v; want \"bye\" then EOF", rest, err)
	}
}

func TestConnectSendsWhatTheClientSentEarly(t *testing.T) {
	echo := newEcho(t)
	s := serve(t, egress.Options{}, allowList(false, echo.addr()), egress.Hooks{})
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(deadline))
	// A client may send its first bytes (a TLS hello) with the request.
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\nearly", echo.addr())
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%v, %v", resp, err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(r, got); err != nil || string(got) != "early" {
		t.Fatalf("%q, %v", got, err)
	}
}

func TestConnectRefusesWhatTheListDoesNotNameAndCoalescesDenials(t *testing.T) {
	echo, other := newEcho(t), newEcho(t)
	clk := newClock()
	var d denials
	s := serve(t, egress.Options{Now: clk.Now}, allowList(false, echo.addr()), egress.Hooks{Denied: d.hook})
	for range 3 {
		connect(t, s.addr, other.addr()).wantStatus(t, http.StatusForbidden, other.addr(), "network allow list", strconv.Quote(other.addr()))
	}
	want := []string{"ses_1 " + other.addr()}
	if got := d.list(); !slices.Equal(got, want) {
		t.Fatalf("denials %q, want %q (three refusals within a minute are one)", got, want)
	}
	clk.Advance(59 * time.Second)
	connect(t, s.addr, other.addr()).wantStatus(t, http.StatusForbidden)
	connect(t, s.addr, "127.0.0.1:1").wantStatus(t, http.StatusForbidden)
	want = append(want, "ses_1 127.0.0.1:1")
	if got := d.list(); !slices.Equal(got, want) {
		t.Fatalf("denials %q, want %q", got, want)
	}
	clk.Advance(time.Second)
	connect(t, s.addr, other.addr()).wantStatus(t, http.StatusForbidden)
	want = append(want, "ses_1 "+other.addr())
	if got := d.list(); !slices.Equal(got, want) {
		t.Fatalf("denials %q, want %q (a minute later it is told again)", got, want)
	}
	if n := other.accepted.Load(); n != 0 {
		t.Fatalf("the refused server was reached %d times", n)
	}
}

func TestConnectRefusesBadTargets(t *testing.T) {
	s := serve(t, egress.Options{}, allowList(false, "example.com"), egress.Hooks{})
	for _, target := range []string{"example.com", "example.com:0", "example.com:65536", "example.com:0443",
		"127.1:80", "*.example.com:443", "exa_mple com:443", "[::1:443"} {
		if tc := connect(t, s.addr, target); tc.status != http.StatusBadRequest {
			t.Errorf("CONNECT %s: %d (%q), want 400", target, tc.status, tc.body)
		}
	}
}

// names is a fake network: names of the list resolve to documentation
// addresses, routed to the echo server.
func names(echo *echoServer) *fakeNet {
	return &fakeNet{
		names: map[string][]netip.Addr{
			"a.example.com":   {netip.MustParseAddr("203.0.113.1")},
			"b.a.example.com": {netip.MustParseAddr("203.0.113.1")},
			"example.com":     {netip.MustParseAddr("203.0.113.1")},
			"pypi.org":        {netip.MustParseAddr("203.0.113.2")},
		},
		routes: map[string]string{
			"203.0.113.1:443":  echo.addr(),
			"203.0.113.1:80":   echo.addr(),
			"203.0.113.1:8443": echo.addr(),
			"203.0.113.2:8443": echo.addr(),
			"203.0.113.2:443":  echo.addr(),
		},
	}
}

func TestConnectMatchesNamesByWildcardAndPort(t *testing.T) {
	echo := newEcho(t)
	fn := names(echo)
	var d denials
	s := serve(t, egress.Options{Resolver: fn, Dialer: fn}, allowList(false, "*.example.com", "pypi.org:8443"), egress.Hooks{Denied: d.hook})
	cases := []struct {
		target string
		ok     bool
	}{
		{"a.example.com:443", true},
		{"B.A.Example.COM.:80", true},
		{"a.example.com:8443", false}, // a portless entry: 80 and 443
		{"example.com:443", false},    // a wildcard is never its suffix
		{"pypi.org:8443", true},
		{"pypi.org:443", false},
		{"203.0.113.1:443", false}, // a name's address is no name
	}
	for _, c := range cases {
		tc := connect(t, s.addr, c.target)
		if !c.ok {
			tc.wantStatus(t, http.StatusForbidden)
			continue
		}
		tc.wantStatus(t, http.StatusOK)
		tc.roundTrip(t, "x")
	}
	lookups, _ := fn.seen()
	// A refused name is never looked up: the agent cannot send data out
	// through the host's DNS.
	for _, name := range lookups {
		if name != "a.example.com" && name != "b.a.example.com" && name != "pypi.org" {
			t.Errorf("%s was looked up", name)
		}
	}
	if len(d.list()) != 4 {
		t.Errorf("denials %q, want the 4 refusals", d.list())
	}
}

func TestANameThatResolvesToTheHostIsRefusedUnlessTheAddressIsListed(t *testing.T) {
	echo := newEcho(t)
	port := strconv.Itoa(echo.port())
	fn := &fakeNet{names: map[string][]netip.Addr{
		"sneaky.test": {netip.MustParseAddr("127.0.0.1")},
		"mapped.test": {netip.MustParseAddr("::ffff:127.0.0.1")},
		"lan.test":    {netip.MustParseAddr("10.9.8.7")},
		"mixed.test":  {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("203.0.113.7")},
	}, routes: map[string]string{"203.0.113.7:" + port: echo.addr()}}
	var d denials
	policy := allowList(false, "sneaky.test:"+port, "mapped.test:"+port, "lan.test:"+port, "mixed.test:"+port)
	s := serve(t, egress.Options{Resolver: fn, Dialer: fn}, policy, egress.Hooks{Denied: d.hook})
	for _, name := range []string{"sneaky.test", "mapped.test", "lan.test"} {
		connect(t, s.addr, name+":"+port).wantStatus(t, http.StatusForbidden, "resolves to", "an address of the host")
	}
	if n := echo.accepted.Load(); n != 0 {
		t.Fatalf("a name reached the host's loopback %d times", n)
	}
	if got := d.list(); len(got) != 3 {
		t.Errorf("denials %q, want the 3 names", got)
	}
	// Of a name's addresses, only those that are not the host's are dialed.
	tc := connect(t, s.addr, "mixed.test:"+port)
	tc.wantStatus(t, http.StatusOK)
	tc.roundTrip(t, "x")
	if _, dials := fn.seen(); !slices.Equal(dials, []string{"203.0.113.7:" + port}) {
		t.Errorf("dialed %q, want only the public address", dials)
	}

	// Naming the address as well lets the name reach it.
	s2 := serve(t, egress.Options{Resolver: fn, Dialer: fn}, allowList(false, "sneaky.test:"+port, echo.addr()), egress.Hooks{})
	tc = connect(t, s2.addr, "sneaky.test:"+port)
	tc.wantStatus(t, http.StatusOK)
	tc.roundTrip(t, "y")
}

func TestConnectAnswers502ForWhatCannotBeReached(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	fn := &fakeNet{}
	s := serve(t, egress.Options{Resolver: fn, Dialer: fn}, allowList(false, closed, "gone.example.com"), egress.Hooks{})
	connect(t, s.addr, closed).wantStatus(t, http.StatusBadGateway, "cannot connect to "+closed)
	connect(t, s.addr, "gone.example.com:443").wantStatus(t, http.StatusBadGateway, "cannot resolve gone.example.com")
}

func TestATunnelQuietBothWaysEndsAndOneBusyOneWayLasts(t *testing.T) {
	// A server that sends a byte every 20 ms for 30 times, then closes.
	ln := listen(t)
	testenv.Serve(t, ln, func(c net.Conn) {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range 30 {
			<-tick.C
			if _, err := c.Write([]byte("t")); err != nil {
				return
			}
		}
	})
	echo := newEcho(t)
	s := serve(t, egress.Options{IdleTimeout: 150 * time.Millisecond}, allowList(false, ln.Addr().String(), echo.addr()), egress.Hooks{})

	// 600 ms of bytes one way only, four idle timeouts: all arrive.
	tc := connect(t, s.addr, ln.Addr().String())
	tc.wantStatus(t, http.StatusOK)
	got, err := io.ReadAll(tc.r)
	if err != nil || len(got) != 30 {
		t.Fatalf("read %d bytes, %v; want 30", len(got), err)
	}

	// Nothing either way: the tunnel ends.
	start := time.Now()
	quiet := connect(t, s.addr, echo.addr())
	quiet.wantStatus(t, http.StatusOK)
	if !closedByPeer(quiet.Conn, quiet.r) {
		t.Fatal("an idle tunnel stayed open")
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("an idle tunnel ended after %v, before its idle timeout", took)
	}
}

func TestMaxConnsBoundsTunnels(t *testing.T) {
	echo := newEcho(t)
	s := serve(t, egress.Options{MaxConns: 2}, allowList(false, echo.addr()), egress.Hooks{})
	a := connect(t, s.addr, echo.addr())
	a.wantStatus(t, http.StatusOK)
	b := connect(t, s.addr, echo.addr())
	b.wantStatus(t, http.StatusOK)
	connect(t, s.addr, echo.addr()).wantStatus(t, http.StatusServiceUnavailable, "too many connections")
	a.Close()
	waitFor(t, "a slot freed by a closed tunnel", func() bool {
		c := connect(t, s.addr, echo.addr())
		defer c.Close()
		return c.status == http.StatusOK
	})
	b.roundTrip(t, "still")
}

func TestCloseEndsTunnels(t *testing.T) {
	echo := newEcho(t)
	// serve's cleanup checks that Serve returned nil once closed.
	s := serve(t, egress.Options{}, allowList(false, echo.addr()), egress.Hooks{})
	p := s.proxy
	tc := connect(t, s.addr, echo.addr())
	tc.wantStatus(t, http.StatusOK)
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	if !closedByPeer(tc.Conn, tc.r) {
		t.Fatal("the tunnel outlived Close")
	}
	select {
	case <-closed:
	case <-time.After(deadline):
		t.Fatal("Close did not return")
	}
	// The id is free again; a closed Proxy makes no more sessions.
	s2, err := p.Session("ses_1", allowList(false), egress.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	p.Close()
	if _, err := p.Session("ses_2", allowList(false), egress.Hooks{}); !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("a session of a closed proxy: %v", err)
	}
}

func TestDenialsToldPerWindowAreBounded(t *testing.T) {
	clk := newClock()
	var d denials
	p := egress.New(egress.Options{Now: clk.Now})
	defer p.Close()
	s, err := p.Session("ses_1", allowList(false), egress.Hooks{Denied: d.hook})
	if err != nil {
		t.Fatal(err)
	}
	deny := func(port int) {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodConnect, "example.com:"+strconv.Itoa(port), nil))
		if w.Code != http.StatusForbidden {
			t.Fatalf("port %d: %d", port, w.Code)
		}
	}
	// A hostile agent trying many destinations fills no log: past 1024
	// within a minute, refusals are not told.
	for port := 1; port <= 1100; port++ {
		deny(port)
	}
	if n := len(d.list()); n != 1024 {
		t.Fatalf("%d denials told, want 1024", n)
	}
	clk.Advance(time.Minute)
	deny(2000)
	if n := len(d.list()); n != 1025 {
		t.Fatalf("%d denials told a minute later, want 1025", n)
	}
}
