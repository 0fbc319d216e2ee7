package gateway

import "bytes"

// Bounds of the scanner.
const (
	// scanDepth is how many levels of nesting the scanner keeps the keys
	// of; deeper values are followed, never watched.
	scanDepth = 8
	// keyCap is the longest key the scanner can match.
	keyCap = 24
	// captureCap bounds a watched value the scanner hands over whole; a
	// larger one is reported without its bytes.
	captureCap = 16 << 10
)

// scanner follows JSON text fed to it in pieces of any size, holding
// nothing of it but the keys around the current value, and hands over the
// values found at the key paths it watches (an object's value, a string
// with its quotes, or a scalar), whole, with their offsets. Arrays add no
// key to a path: the usage of each element of a top-level array is at the
// path "usageMetadata" as it would be at the top level.
//
// It is made for text the gateway passes on as it arrives (an answer's
// usage, a request's model): it never fails, and text that is not JSON
// only makes it find nothing.
type scanner struct {
	// watch lists the key paths to watch.
	watch [][]string
	// found is called for each watched value once it ends: w its index in
	// watch, raw its bytes (nil when larger than captureCap; valid only
	// during the call), [start, end) its offsets in the text.
	found func(w int, raw []byte, start, end int64)

	off      int64 // offset of the start of the piece being fed
	stack    [scanDepth]frame
	depth    int
	objDepth int // objects among the kept frames
	maxPath  int // the longest watched path

	inStr    bool // in a string
	strKey   bool // the string is a key, collected into the top frame
	escape   bool // in a string, after a backslash
	inScalar bool // in a number, true, false or null

	capW     int   // watched path being captured; -1: none
	capKind  byte  // '{', '[', '"' or 's' (scalar)
	capDepth int   // depth at which the captured value ends
	capStart int64 // its offset
	capFrom  int   // where it starts in the piece being fed (0: before it)
	capBuf   []byte
	capOver  bool // larger than captureCap: its bytes are dropped
}

// nesting marks the bytes that start a string or open or close a level.
var nesting = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// frame is one level of nesting.
type frame struct {
	object  bool
	wantKey bool // in an object, the next string is a key
	keyLen  int  // -1: too long to match
	key     [keyCap]byte
}

// newScanner returns a scanner that calls found for the values at the
// paths watch lists (each a list of keys).
func newScanner(watch [][]string, found func(w int, raw []byte, start, end int64)) *scanner {
	s := &scanner{watch: watch, found: found, capW: -1}
	for _, p := range watch {
		s.maxPath = max(s.maxPath, len(p))
	}
	return s
}

// reset forgets the text so far: the next byte starts a new JSON text
// (an event's data).
func (s *scanner) reset() {
	s.depth, s.objDepth, s.inStr, s.escape, s.inScalar, s.capW = 0, 0, false, false, false, -1
	s.capBuf, s.capOver = s.capBuf[:0], false
}

// top is the innermost frame whose keys are kept, or nil.
func (s *scanner) top() *frame {
	if s.depth == 0 || s.depth > scanDepth {
		return nil
	}
	return &s.stack[s.depth-1]
}

// feed follows p, the next piece of the text.
func (s *scanner) feed(p []byte) {
	s.capFrom = 0
	i := 0
	for i < len(p) {
		if s.inStr {
			i = s.inString(p, i)
			continue
		}
		if s.objDepth > s.maxPath {
			// Deeper than any watched path, only strings and nesting
			// matter (the way back up is a '}' or ']', which ends any
			// scalar): skip the rest.
			for i < len(p) && !nesting[p[i]] {
				i++
			}
			if i == len(p) {
				break
			}
		}
		c := p[i]
		switch c {
		case ' ', '\t', '\n', '\r', ':':
			s.endScalar(p, i)
		case '"':
			s.endScalar(p, i)
			if f := s.top(); f != nil && f.object && f.wantKey {
				s.strKey, f.keyLen = true, 0
			} else {
				s.strKey = false
				s.valueStart(i, '"')
			}
			s.inStr = true
		case ',':
			s.endScalar(p, i)
			if f := s.top(); f != nil && f.object {
				f.wantKey = true
			}
		case '{', '[':
			s.endScalar(p, i)
			s.valueStart(i, c)
			if s.depth < scanDepth {
				s.stack[s.depth] = frame{object: c == '{', wantKey: c == '{'}
				if c == '{' {
					s.objDepth++
				}
			}
			s.depth++
		case '}', ']':
			s.endScalar(p, i)
			if s.depth > 0 {
				s.depth--
				if s.depth < scanDepth && s.stack[s.depth].object {
					s.objDepth--
				}
			}
			if s.capW >= 0 && (s.capKind == '{' || s.capKind == '[') && s.depth == s.capDepth {
				s.capEnd(p, i+1)
			}
		default:
			if !s.inScalar {
				s.inScalar = true
				s.valueStart(i, 's')
			}
		}
		i++
	}
	if s.capW >= 0 {
		s.capKeep(p[s.capFrom:])
	}
	s.off += int64(len(p))
}

// inString follows a string from p[i] and returns where to go on: past
// its closing quote, or len(p) when it goes on past p.
func (s *scanner) inString(p []byte, i int) int {
	from := i
	if s.escape {
		// The piece before ended on an odd run of backslashes.
		s.escape = false
		i++
	}
	lo := i
	end := -1
	// Most of a conversation is text inside strings: jump from quote to
	// quote, never byte by byte; a quote after an odd run of backslashes
	// is part of the string.
	for i < len(p) {
		q := bytes.IndexByte(p[i:], '"')
		if q < 0 {
			break
		}
		q += i
		if backslashes(p, lo, q)%2 == 0 {
			end = q
			break
		}
		i = q + 1
	}
	if s.strKey && s.objDepth <= s.maxPath {
		stop := len(p)
		if end >= 0 {
			stop = end
		}
		s.keyBytes(p[from:stop])
	}
	if end < 0 {
		s.escape = backslashes(p, lo, len(p))%2 == 1
		return len(p)
	}
	s.inStr = false
	if s.strKey {
		if f := s.top(); f != nil {
			f.wantKey = false
		}
	} else if s.capW >= 0 && s.capKind == '"' {
		s.capEnd(p, end+1)
	}
	return end + 1
}

// backslashes counts the backslashes right before p[at], back to p[lo].
func backslashes(p []byte, lo, at int) int {
	n := 0
	for at > lo && p[at-1] == '\\' {
		at--
		n++
	}
	return n
}

// keyBytes adds b to the key being read.
func (s *scanner) keyBytes(b []byte) {
	f := s.top()
	if f == nil || f.keyLen < 0 {
		return
	}
	if f.keyLen+len(b) > keyCap {
		f.keyLen = -1
		return
	}
	f.keyLen += copy(f.key[f.keyLen:], b)
}

// endScalar ends the scalar the text was in, if any, at p[i].
func (s *scanner) endScalar(p []byte, i int) {
	if !s.inScalar {
		return
	}
	s.inScalar = false
	if s.capW >= 0 && s.capKind == 's' {
		s.capEnd(p, i)
	}
}

// valueStart notes a value starting at p[i] (kind as capKind): when its
// path is watched, its capture begins.
func (s *scanner) valueStart(i int, kind byte) {
	if s.capW >= 0 || s.depth > scanDepth || s.objDepth > s.maxPath {
		return
	}
	for w, path := range s.watch {
		if s.at(path) {
			s.capW, s.capKind, s.capDepth = w, kind, s.depth
			s.capStart, s.capFrom = s.off+int64(i), i
			s.capBuf, s.capOver = s.capBuf[:0], false
			return
		}
	}
}

// at reports whether the value starting now is at path.
func (s *scanner) at(path []string) bool {
	k := 0
	for d := range s.depth {
		f := &s.stack[d]
		if !f.object {
			continue
		}
		if f.wantKey || k == len(path) || f.keyLen != len(path[k]) || string(f.key[:f.keyLen]) != path[k] {
			return false
		}
		k++
	}
	return k == len(path)
}

// capKeep keeps b, the captured value's bytes in the piece fed.
func (s *scanner) capKeep(b []byte) {
	if s.capOver {
		return
	}
	if len(s.capBuf)+len(b) > captureCap {
		s.capOver, s.capBuf = true, s.capBuf[:0]
		return
	}
	s.capBuf = append(s.capBuf, b...)
}

// capEnd ends the capture at p[end] (exclusive) and hands it over.
func (s *scanner) capEnd(p []byte, end int) {
	w := s.capW
	s.capW = -1
	raw := p[s.capFrom:end]
	if len(s.capBuf) > 0 || s.capOver {
		s.capKeep(raw)
		raw = s.capBuf
	}
	if s.capOver {
		raw = nil
	}
	s.found(w, raw, s.capStart, s.off+int64(end))
	s.capBuf, s.capOver = s.capBuf[:0], false
}
