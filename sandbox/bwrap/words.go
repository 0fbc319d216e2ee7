package bwrap

import (
	"io"
	"strings"
	"sync"
	"unicode"
)

// maxWords bounds what a failed start keeps of a tool's own words
// (bwrap's stderr, slirp4netns's), and what of them goes into an error's
// message.
const maxWords = 2048

// startWords is a caller's stderr writer while a sandbox starts: it
// passes everything on and keeps the first maxWords bytes, bwrap's own
// words should the start fail. stop ends the keeping once the program
// runs: what it writes is the caller's alone.
type startWords struct {
	w io.Writer

	mu      sync.Mutex
	b       []byte
	stopped bool
}

// Write keeps the head of p while the start lasts, then writes p on.
func (s *startWords) Write(p []byte) (int, error) {
	s.mu.Lock()
	if !s.stopped && len(s.b) < maxWords {
		s.b = append(s.b, p[:min(len(p), maxWords-len(s.b))]...)
	}
	s.mu.Unlock()
	return s.w.Write(p)
}

// stop forgets what was kept and keeps nothing more. A nil s is a no-op.
func (s *startWords) stop() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.stopped, s.b = true, nil
	s.mu.Unlock()
}

// String is what was kept.
func (s *startWords) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

// oneLine makes a tool's words fit an error message: their lines joined
// with "; ", other control characters and invalid UTF-8 dropped, cut to
// maxWords bytes.
func oneLine(s string) string {
	var lines []string
	for l := range strings.Lines(s) {
		l = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || r == unicode.ReplacementChar {
				return -1
			}
			return r
		}, strings.ToValidUTF8(l, ""))
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	out := strings.Join(lines, "; ")
	if len(out) > maxWords {
		out = strings.ToValidUTF8(out[:maxWords], "") + "…"
	}
	return out
}
