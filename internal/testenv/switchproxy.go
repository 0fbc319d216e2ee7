package testenv

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// SwitchProxy forwards a loopback port to a TCP address while up; while
// down it closes every connection, open or new: a server stopped and
// started again, as its clients see it.
type SwitchProxy struct {
	ln   net.Listener
	down atomic.Bool
	wg   sync.WaitGroup
	mu   sync.Mutex
	open []net.Conn
}

// NewSwitchProxy forwards a loopback port to addr until the test ends.
func NewSwitchProxy(tb testing.TB, addr string) *SwitchProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &SwitchProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if p.down.Load() || err != nil {
				conn.Close()
				if up != nil {
					up.Close()
				}
				continue
			}
			p.mu.Lock()
			p.open = append(p.open, conn, up)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(up, conn); up.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(conn, up); conn.Close() }()
		}
	}()
	tb.Cleanup(func() { ln.Close(); p.SetDown(true); p.wg.Wait() })
	return p
}

// Addr is the proxy's host:port.
func (p *SwitchProxy) Addr() string { return p.ln.Addr().String() }

// SetDown takes the server away (closing the connections open) or back.
func (p *SwitchProxy) SetDown(down bool) {
	p.down.Store(down)
	if !down {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.open {
		c.Close()
	}
	p.open = nil
}

// S3ThroughProxy returns the [storage] url s3url with its endpoint through
// a new SwitchProxy, and the proxy.
func S3ThroughProxy(tb testing.TB, s3url string) (string, *SwitchProxy) {
	tb.Helper()
	u, err := url.Parse(s3url)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	ep, err := url.Parse(q.Get("endpoint"))
	if err != nil {
		tb.Fatal(err)
	}
	p := NewSwitchProxy(tb, ep.Host)
	q.Set("endpoint", "http://"+p.Addr())
	u.RawQuery = q.Encode()
	return u.String(), p
}
