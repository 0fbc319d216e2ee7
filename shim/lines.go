package shim

import (
	"bytes"
	"time"

	"github.com/berth-sh/berth/acp"
)

// keepLineBuffer bounds the line buffer kept from one line to the next: a
// long line's buffer is let go once it is spooled.
const keepLineBuffer = 1 << 20

// lines takes the agent's stdout as it comes and spools it a whole line at
// a time, deciding for each line whether the spool keeps it: a line over
// the cap never does (the daemon would skip it), nor does output past the
// window's cap (see window). What is kept is published to the daemon
// connection at each line's end; a daemon's reader waits for whole lines
// anyway. Only pumpStdout's goroutine uses it.
type lines struct {
	s *server
	// pos is where the next spooled line goes in the stream.
	pos int64
	// max caps a line, its newline included, as the daemon's reader does.
	max int64
	// cur is the line being read; n counts the bytes the agent wrote of
	// it. Once n is over max, over is set and cur is let go.
	cur  []byte
	n    int64
	over bool
}

// write takes a chunk of the agent's stdout.
func (l *lines) write(chunk []byte) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			l.add(chunk)
			return
		}
		l.add(chunk[:i+1])
		chunk = chunk[i+1:]
		l.finish(nil, true)
	}
}

// add appends a piece of the current line.
func (l *lines) add(seg []byte) {
	l.n += int64(len(seg))
	if l.over {
		return
	}
	if l.n > l.max {
		l.over, l.cur = true, nil
		return
	}
	l.cur = append(l.cur, seg...)
}

// eof spools what is left when the agent's stdout ends: the reports due
// (a window's drops, told one last time), then the last line if it had no
// newline.
func (l *lines) eof() {
	s := l.s
	s.mu.Lock()
	pre := s.takePendingLocked()
	if w := &s.win; w.dropped > 0 {
		pre = append(pre, reportLine(w.report(s.token, true))...)
		*w = newWindow("", l.pos)
	}
	s.mu.Unlock()
	if l.n > 0 {
		l.finish(pre, false)
		return
	}
	if pre != nil {
		l.put(pre)
		l.publish(nil)
	}
}

// finish decides what the spool keeps of the line just read (nl: ended
// by a newline), spools it after pre (reports due before it), and
// publishes it.
func (l *lines) finish(pre []byte, nl bool) {
	line, n, over := l.cur, l.n, l.over
	defer func() {
		l.cur, l.n, l.over = l.cur[:0], 0, false
		if cap(l.cur) > keepLineBuffer {
			l.cur = nil
		}
	}()
	s := l.s
	if over {
		size := n
		if nl {
			size--
		}
		s.mu.Lock()
		pre = append(pre, s.takePendingLocked()...)
		s.mu.Unlock()
		pre = append(pre, reportLine(Report{Token: s.token, OversizedLine: size})...)
		l.put(pre)
		l.publish(nil)
		return
	}
	kind, id := classify(line)
	if kind == acp.KindResponse {
		s.sendThen(id, line)
	}
	// A long text chunk reaches the daemon in pieces it logs as they are:
	// the daemon never holds the whole of it. Cut before the window
	// counts it, as spooled.
	var pieces [][]byte
	size := int64(len(line))
	if kind != acp.KindRequest && kind != acp.KindResponse && len(line) > acp.TextPieceBytes {
		if pieces, _ = acp.SplitTextChunk(line, acp.TextPieceBytes); pieces != nil {
			size = 0
			for _, p := range pieces {
				size += int64(len(p))
			}
		}
	}
	keep := true
	var refusal []byte
	s.mu.Lock()
	pre = append(pre, s.takePendingLocked()...)
	switch w := &s.win; {
	case kind == acp.KindResponse && s.ledger.pending(string(id)):
		// The answer to one of the daemon's calls, which the daemon bounds.
		if w.prompt != "" && string(id) == w.prompt {
			// The answer to the turn's prompt: its drops are told right
			// before it, and a window between turns begins.
			if w.dropped > 0 {
				pre = append(pre, reportLine(w.report(s.token, true))...)
			}
			*w = newWindow("", l.pos)
		}
	default:
		// Output, a request, or an answer to nothing: all count. Where the
		// line goes is counted with it, under the same lock as a hello.
		if keep = w.admit(n, s.cfg.MaxTurnOutput); keep {
			w.keep(l.pos+int64(len(pre)), size)
			break
		}
		if kind == acp.KindRequest {
			w.refused++
			refusal = refusalLine(id)
		}
		if now := time.Now(); w.due(now) {
			w.reported = now
			pre = append(pre, reportLine(w.report(s.token, false))...)
			if w.cut == 0 {
				w.cut = l.pos + int64(len(pre))
			}
		}
	}
	s.mu.Unlock()
	if refusal != nil {
		s.refuse(refusal)
	}
	if pre != nil {
		l.put(pre)
	}
	if !keep {
		l.publish(nil)
		return
	}
	if pieces != nil {
		for _, p := range pieces {
			l.put(p)
		}
		l.publish(nil)
		return
	}
	l.put(line)
	if li, ok := infoOf(kind, id, line, l.pos); ok {
		l.publish(&li)
		return
	}
	l.publish(nil)
}

// put appends b to the spool at pos.
func (l *lines) put(b []byte) {
	if _, err := l.s.spool.WriteAt(b, l.pos-l.s.cfg.Base); err != nil {
		l.s.log.Error("spool write failed", "err", err)
	}
	l.pos += int64(len(b))
}

// publish makes what was spooled so far visible to the daemon connection,
// and records the request or answer that was spooled last, if any.
func (l *lines) publish(seen *lineInfo) {
	s := l.s
	s.mu.Lock()
	s.end = l.pos
	if seen != nil {
		s.ledger.sawAgent(*seen)
	}
	// The connection's sender takes it from the spool: a daemon that
	// reads slowly never holds up the agent, the spool absorbs it.
	s.cond.Broadcast()
	s.mu.Unlock()
}
