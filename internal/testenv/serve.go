package testenv

import (
	"net"
	"sync"
	"testing"
)

// Serve calls handle with each connection ln accepts, each on a goroutine
// of its own, and closes the connection when handle returns. The test's
// end closes ln and waits for the accept loop and every handle.
func Serve(tb testing.TB, ln net.Listener, handle func(net.Conn)) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	tb.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
}
