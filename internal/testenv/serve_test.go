package testenv

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// Serve answers every connection, closes each after its handler, and the
// test's end closes the listener and waits for the handlers.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	t.Run("served", func(t *testing.T) {
		Serve(t, ln, func(c net.Conn) {
			_, _ = c.Write([]byte("hi"))
			handled.Add(1)
		})
		for range 3 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			// The handler's close ends what the client reads.
			b, err := io.ReadAll(c)
			c.Close()
			if err != nil || string(b) != "hi" {
				t.Fatalf("read %q, %v", b, err)
			}
		}
	})
	// The subtest's cleanup has run: every handler returned, the listener is closed.
	if n := handled.Load(); n != 3 {
		t.Errorf("%d handlers returned, want 3", n)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the listener is open after the test's end")
	}
}
