package transcript

import (
	"strings"
	"unicode/utf8"
)

// pieces is a text kept as the chunks it came in, up to max bytes (0: no
// bound).
type pieces struct {
	chunks []string
	size   int
	max    int
}

// add appends a chunk, or as much of it as max leaves room for.
func (p *pieces) add(s string) {
	if p.max > 0 && p.size+len(s) > p.max {
		// Cut on a character's start, so no character is cut in half.
		n := max(0, p.max-p.size)
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	if s != "" {
		p.chunks = append(p.chunks, s)
		p.size += len(s)
	}
}

// join returns the text, built in one buffer of its exact size.
func (p *pieces) join() string {
	if len(p.chunks) == 1 {
		return p.chunks[0]
	}
	var b strings.Builder
	b.Grow(p.size)
	for _, c := range p.chunks {
		b.WriteString(c)
	}
	return b.String()
}
