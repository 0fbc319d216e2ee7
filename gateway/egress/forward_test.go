package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/gateway/egress"
)

// proxyClient is an HTTP client whose every request goes through the
// proxy at addr.
func proxyClient(t *testing.T, addr string) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: deadline}
}

func TestPlainHTTPIsForwardedToListedHosts(t *testing.T) {
	type seen struct{ host, uri, proxyAuth, proxyConn, xff, body string }
	got := make(chan seen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Host, r.RequestURI, r.Header.Get("Proxy-Authorization"), r.Header.Get("Proxy-Connection"), r.Header.Get("X-Forwarded-For"), string(b)}
		w.Header().Set("X-Up", "yes")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "from upstream")
	}))
	defer up.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("an unlisted server was reached: %s", r.URL)
	}))
	defer other.Close()
	host := strings.TrimPrefix(up.URL, "http://")
	otherHost := strings.TrimPrefix(other.URL, "http://")
	var d denials
	s := serve(t, egress.Options{}, allowList(false, host), egress.Hooks{Denied: d.hook})
	c := proxyClient(t, s.addr)

	req, _ := http.NewRequest(http.MethodPost, up.URL+"/p/a?q=1", strings.NewReader("payload"))
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("X-Forwarded-For", "1.2.3.4")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || string(body) != "from upstream" || resp.Header.Get("X-Up") != "yes" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
	want := seen{host: host, uri: "/p/a?q=1", body: "payload"}
	if g := <-got; g != want {
		t.Fatalf("upstream saw %+v, want %+v", g, want)
	}

	// A Host header that names another host than the URL is not where
	// the request goes, nor what the server is told.
	raw, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(deadline))
	fmt.Fprintf(raw, "GET %s/h HTTP/1.1\r\nHost: %s\r\n\r\n", up.URL, otherHost)
	resp, err = http.ReadResponse(bufio.NewReader(raw), nil)
	if err != nil || resp.StatusCode != http.StatusTeapot {
		t.Fatalf("%v, %v", resp, err)
	}
	if g := <-got; g.host != host || g.uri != "/h" {
		t.Fatalf("upstream saw %+v", g)
	}

	resp, err = c.Get(other.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), otherHost) {
		t.Fatalf("unlisted: %d %q", resp.StatusCode, body)
	}
	if got := d.list(); !slices.Equal(got, []string{"ses_1 " + otherHost}) {
		t.Fatalf("denials %q", got)
	}
}

func TestPlainHTTPAnswersStreamAsTheyArrive(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "second\n")
	}))
	defer up.Close()
	defer close(release)
	s := serve(t, egress.Options{}, allowList(false, strings.TrimPrefix(up.URL, "http://")), egress.Hooks{})
	resp, err := proxyClient(t, s.addr).Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The first line arrives while the upstream still holds the second.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("%q, %v", line, err)
	}
}

func TestPlainHTTPToANameGoesToTheAddressTheProxyResolved(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Host)
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	echo := newEcho(t)
	fn := names(echo)
	fn.routes["203.0.113.1:80"] = strings.TrimPrefix(up.URL, "http://")
	fn.names["localhost"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	s := serve(t, egress.Options{Resolver: fn, Dialer: fn}, allowList(false, "*.example.com", "localhost:"+port), egress.Hooks{})
	c := proxyClient(t, s.addr)
	resp, err := c.Get("http://a.example.com/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "a.example.com" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	// localhost is a name of the list, but the host's resolver says
	// 127.0.0.1: refused.
	resp, err = c.Get("http://localhost:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "resolves to 127.0.0.1") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}

func TestTheProxyRefusesWhatIsNotAProxyRequest(t *testing.T) {
	s := serve(t, egress.Options{}, allowList(false, "example.com"), egress.Hooks{})
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET ftp://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET http://127.1/ HTTP/1.1\r\nHost: 127.1\r\n\r\n",
	} {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(deadline))
		fmt.Fprint(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: %v, %v; want 400", req, resp, err)
		}
	}
}

func TestPlainHTTPToAFailingServerIs502WithoutItsAddress(t *testing.T) {
	// A server that reads the request and resets the connection.
	ln := listen(t)
	hungUp := make(chan struct{})
	go func() {
		defer close(hungUp)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.SetDeadline(time.Now().Add(deadline))
		http.ReadRequest(bufio.NewReader(c))
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}()
	s := serve(t, egress.Options{}, allowList(false, ln.Addr().String()), egress.Hooks{})
	resp, err := proxyClient(t, s.addr).Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	<-hungUp
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(body), "127.0.0.1") {
		t.Fatalf("%d %q, want 502 naming no address", resp.StatusCode, body)
	}
}
