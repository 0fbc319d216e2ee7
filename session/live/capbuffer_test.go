package live

import (
	"strings"
	"testing"
)

func TestCapBufferKeepsTheLastBytes(t *testing.T) {
	b := newCapBuffer(10)
	for i := range 100 {
		if n, err := b.Write([]byte{byte('a' + i%26)}); n != 1 || err != nil {
			t.Fatalf("write = %d, %v", n, err)
		}
	}
	got, truncated := b.snapshot()
	if got != "mnopqrstuv" || !truncated {
		t.Fatalf("snapshot = %q, %v", got, truncated)
	}
	if n, _ := b.Write([]byte(strings.Repeat("x", 25))); n != 25 {
		t.Fatalf("a long write reported %d bytes", n)
	}
	if got, _ := b.snapshot(); got != strings.Repeat("x", 10) {
		t.Fatalf("after a long write = %q", got)
	}
	small := newCapBuffer(10)
	small.Write([]byte("héllo"))
	if got, truncated := small.snapshot(); got != "héllo" || truncated {
		t.Fatalf("under the limit = %q, %v", got, truncated)
	}
	if len(b.buf) > 20 {
		t.Fatalf("buffer grew to %d bytes for a limit of 10", len(b.buf))
	}
}
