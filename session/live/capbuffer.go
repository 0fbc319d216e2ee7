package live

import (
	"sync"
	"unicode/utf8"
)

// capBuffer keeps the last limit bytes written to it (ACP truncates a
// terminal's output from the beginning).
type capBuffer struct {
	// mu guards the fields below; the command's output is written under
	// it (the lock order is written on Session).
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
	n := len(p)
	if len(p) > b.limit {
		p = p[len(p)-b.limit:]
		b.truncated = true
	}
	b.buf = append(b.buf, p...)
	// Drop the front only once it is as long as the limit: amortised O(1).
	if len(b.buf) > b.limit && len(b.buf) >= 2*b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
		b.truncated = true
	}
	return n, nil
}

// snapshot returns the kept output, starting at a character boundary.
func (b *capBuffer) snapshot() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf
	if len(out) > b.limit {
		out, b.truncated = out[len(out)-b.limit:], true
	}
	for len(out) > 0 && !utf8.RuneStart(out[0]) {
		out = out[1:]
	}
	return string(out), b.truncated
}
