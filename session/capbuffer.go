package session

import (
	"sync"
	"unicode/utf8"
)

// capBuffer keeps the last limit bytes written to it (ACP truncates a
// terminal's output from the beginning).
type capBuffer struct {
	mu        sync.Mutex
	limit     int
	buf       []byte
	truncated bool
}

func newCapBuffer(limit int) *capBuffer { return &capBuffer{limit: limit} }

// Write implements io.Writer; it never fails.
func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.truncated = true
	}
	return len(p), nil
}

// snapshot returns the kept output, starting at a character boundary.
func (b *capBuffer) snapshot() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf
	for len(out) > 0 && !utf8.RuneStart(out[0]) {
		out = out[1:]
	}
	return string(out), b.truncated
}
