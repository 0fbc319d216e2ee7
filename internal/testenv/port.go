package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Answering is an HTTP server on the host's loopback that answers name
// to every request, and its address: never one of avoid (a port a
// sandbox's relay holds on the sandbox's own loopback, where a test's
// "direct" connection would reach the relay instead). A drawn port it
// avoids is closed after the next is drawn, so it is not handed back.
func Answering(t testing.TB, name string, avoid ...string) (*httptest.Server, string) {
	t.Helper()
	for {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) }))
		addr := strings.TrimPrefix(srv.URL, "http://")
		if slices.Contains(avoid, addr) {
			defer srv.Close()
			continue
		}
		t.Cleanup(srv.Close)
		return srv, addr
	}
}

// FreeAddr returns a loopback address nothing listens on, for a process
// the test starts to listen on. Its port is picked below the kernel's
// ephemeral range: a port from the range (":0") can be handed to any
// other process's listener or connection once its first holder closes
// it, and a daemon then fails to listen on what the test told it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	low := ephemeralLow()
	for range 200 {
		port := 10000 + rand.IntN(low-10000)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				return n
			}
		}
	}
	return 32768
}
