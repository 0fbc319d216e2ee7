package egress_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/berth-sh/berth/gateway/egress"
)

// A connection pays this once: CONNECT through the proxy, the proxy's
// dial, the 200, and one byte there and back.
func BenchmarkConnect(b *testing.B) {
	echo := newEcho(b)
	s := serve(b, egress.Options{}, allowList(false, echo.addr()), egress.Hooks{})
	one := make([]byte, 1)
	for b.Loop() {
		tc, err := dialConnect(s.addr, echo.addr())
		if err != nil || tc.status != http.StatusOK {
			b.Fatal(err, tc)
		}
		if _, err := tc.Write(one); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(tc.r, one); err != nil {
			b.Fatal(err)
		}
		tc.Close()
	}
}

// Bytes through an open tunnel to the echo server and back.
func BenchmarkTunnelThroughput(b *testing.B) {
	echo := newEcho(b)
	s := serve(b, egress.Options{}, allowList(false, echo.addr()), egress.Hooks{})
	tc, err := dialConnect(s.addr, echo.addr())
	if err != nil || tc.status != http.StatusOK {
		b.Fatal(err, tc)
	}
	defer tc.Close()
	buf := make([]byte, 256<<10)
	b.SetBytes(int64(len(buf)))
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, tc.r, int64(len(buf))*int64(b.N))
		done <- err
	}()
	for range b.N {
		if _, err := tc.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
