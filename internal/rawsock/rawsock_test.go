package rawsock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func listen(t *testing.T) (*Listener, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln, path
}

// A dialled connection and the accepted one carry bytes both ways, and
// WriteBuffers delivers every buffer in order even when the socket takes
// them in several writes.
func TestDialAcceptWriteBuffers(t *testing.T) {
	ln, path := listen(t)
	accepted := make(chan *Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	defer s.Close()

	// Far more than a socket buffer holds, so writev returns short.
	big := bytes.Repeat([]byte("0123456789"), 400_000)
	done := make(chan error, 1)
	go func() {
		_, err := c.WriteBuffers([]byte("hdr:"), nil, big, []byte(":end"))
		done <- err
	}()
	got := make([]byte, 4+len(big)+4)
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte("hdr:"), big...), ":end"...)
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read are not the buffers written")
	}
	if _, err := s.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 4)
	if _, err := io.ReadFull(c, back); err != nil || string(back) != "back" {
		t.Fatalf("read %q, %v", back, err)
	}
	// The peer's close is the end of the stream.
	_ = s.Close()
	if _, err := c.Read(back); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want EOF", err)
	}
}

// Deadlines work as net's do, and Close wakes a blocked Read.
func TestDeadlinesAndClose(t *testing.T) {
	a, theirs, err := Pair("test")
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	_ = a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	_ = a.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 1))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	_ = a.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read across Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the read")
	}
}

// Close wakes a waiting Accept and removes the socket file; a dial of a
// path where nothing listens fails.
func TestListenerClose(t *testing.T) {
	ln, path := listen(t)
	errc := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("accept across Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the accept")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the socket file is still there: %v", err)
	}
	if _, err := Dial(context.Background(), path); err == nil {
		t.Fatal("a dial of a removed socket succeeded")
	}
	if _, err := Listen(filepath.Join(t.TempDir(), "no", "such", "dir", "s.sock")); err == nil {
		t.Fatal("listen in a missing directory succeeded")
	}
}

// FileConn takes a socket a process inherited, leaving the file its
// caller's.
func TestFileConn(t *testing.T) {
	a, theirs, err := Pair("test")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := FileConn(theirs)
	if err != nil {
		t.Fatal(err)
	}
	_ = theirs.Close()
	defer b.Close()
	if _, err := a.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2)
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "hi" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// A TCP listener on the loopback takes connections net dials; addresses
// that are not an IPv4 literal and a port are refused.
func TestListenTCP4(t *testing.T) {
	ln, err := ListenTCP4("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Port()
	if port == 0 {
		t.Fatal("no port")
	}
	go func() {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("tcp"))
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make([]byte, 3)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "tcp" {
		t.Fatalf("read %q, %v", got, err)
	}
	for _, bad := range []string{"localhost:1", "1.2.3:4", "[::1]:5", "1.2.3.4", "01.2.3.4:5", "1.2.3.4:99999", "1.2.3.256:1", ":80"} {
		if l, err := ListenTCP4(bad); err == nil {
			_ = l.Close()
			t.Errorf("ListenTCP4(%q) listened", bad)
		}
	}
}
