package gateway

import "bytes"

// sseState is where an event stream's reader is in a line.
type sseState uint8

const (
	sseLineStart sseState = iota // at the start of a line
	sseField                     // in a field's name
	sseData                      // in a data field's value: fed to the scanner
	sseSkip                      // in any other field's value, or a comment
)

// sseReader follows a stream of server-sent events, fed in pieces of any
// size, and feeds the data of each event to a scanner, reset between
// events: each event's data is a JSON text of its own.
type sseReader struct {
	sc        *scanner
	state     sseState
	field     [5]byte
	fieldLen  int  // -1: longer than any field it looks for
	cr        bool // the last byte was '\r': a '\n' right after it ends nothing
	skipSpace bool // a data value's first space is not part of it
}

// newline joins the lines of an event's data, as the SSE format says.
var newline = []byte{'\n'}

// feed follows p, the next piece of the stream.
func (r *sseReader) feed(p []byte) {
	i := 0
	for i < len(p) {
		c := p[i]
		if r.cr {
			r.cr = false
			if c == '\n' {
				i++
				continue
			}
		}
		switch r.state {
		case sseLineStart:
			if c == '\n' || c == '\r' {
				// A blank line ends the event.
				r.sc.reset()
				r.cr = c == '\r'
				i++
				continue
			}
			r.state, r.fieldLen = sseField, 0
		case sseField:
			switch {
			case c == ':':
				r.state = sseSkip
				if r.fieldLen == 4 && string(r.field[:4]) == "data" {
					r.state, r.skipSpace = sseData, true
				}
			case c == '\n' || c == '\r':
				r.endLine(c)
			case r.fieldLen >= 0 && r.fieldLen < len(r.field):
				r.field[r.fieldLen] = c
				r.fieldLen++
			default:
				r.fieldLen = -1
			}
			i++
		case sseData, sseSkip:
			if r.skipSpace {
				r.skipSpace = false
				if c == ' ' {
					i++
					continue
				}
			}
			j := bytes.IndexAny(p[i:], "\r\n")
			if j < 0 {
				if r.state == sseData {
					r.sc.feed(p[i:])
				}
				i = len(p)
				continue
			}
			if r.state == sseData {
				r.sc.feed(p[i : i+j])
				r.sc.feed(newline)
			}
			r.endLine(p[i+j])
			i += j + 1
		}
	}
}

// endLine ends a line at c ('\r' or '\n').
func (r *sseReader) endLine(c byte) {
	r.state, r.skipSpace = sseLineStart, false
	r.cr = c == '\r'
}
