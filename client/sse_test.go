package client

import (
	"bufio"
	"strings"
	"testing"
)

func TestSSEReaderParsing(t *testing.T) {
	in := ": hello\n\nid: 1\nevent: x\ndata: a\ndata: b\r\n\nretry: 10\n\ndata:c\n\nid: 2\ndata: partial"
	r := sseReader{br: bufio.NewReader(strings.NewReader(in))}
	m, err := r.next()
	if err != nil || m.id != "1" || !m.hasID || m.event != "x" || string(m.data) != "a\nb" {
		t.Fatalf("first = %+v, %v", m, err)
	}
	m, err = r.next()
	if err != nil || m.hasID || string(m.data) != "c" {
		t.Fatalf("second = %+v, %v", m, err)
	}
	if _, err := r.next(); err == nil {
		t.Fatalf("a cut message was dispatched")
	}
}
