package shim

// The spool: the agent's stdout appended to a file at its stream offset,
// read back by the daemon connection from wherever a daemon stands, and
// punched out below what a daemon has durably processed.

import (
	"bytes"
	"errors"

	"golang.org/x/sys/unix"
)

// maxTracked caps the length of a line the shim keeps whole to learn
// whether it is a request; longer lines are spooled but not tracked.
const maxTracked = 64 << 20

// pumpStdout spools the agent's stdout and learns the requests in it.
func (s *server) pumpStdout() {
	defer s.wg.Done()
	out := s.proc.Stdout()
	buf := make([]byte, 256<<10)
	var partial []byte
	skipping := false
	end := s.cfg.Base
	for {
		n, err := out.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if _, werr := s.spool.WriteAt(chunk, end-s.cfg.Base); werr != nil {
				s.log.Error("spool write failed", "err", werr)
			}
			base := end
			end += int64(n)
			var seen []lineInfo
			for i := 0; i < len(chunk); {
				j := bytes.IndexByte(chunk[i:], '\n')
				if j < 0 {
					if !skipping {
						if len(partial)+len(chunk)-i > maxTracked {
							skipping, partial = true, nil
						} else {
							partial = append(partial, chunk[i:]...)
						}
					}
					break
				}
				line := chunk[i : i+j]
				if len(partial) > 0 {
					line = append(partial, line...)
				}
				if !skipping {
					if li, ok := classify(line, base+int64(i+j+1)); ok {
						seen = append(seen, li)
					}
				}
				partial, skipping = partial[:0], false
				i += j + 1
			}
			s.mu.Lock()
			s.end = end
			for _, li := range seen {
				s.ledger.sawAgent(li)
			}
			// The connection's sender takes it from the spool: a daemon that
			// reads slowly never holds up the agent, the spool absorbs it.
			s.cond.Broadcast()
			s.mu.Unlock()
		}
		if err != nil {
			s.mu.Lock()
			s.outEOF = true
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
	}
}

// punch frees the spool's blocks before offset, and forgets the answered
// calls before it: a daemon has durably processed everything there. The
// file keeps its size, so offsets stay valid.
func (s *server) punch(offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.forget(offset)
	// Nothing past what was spooled is dropped, whatever a daemon claims.
	offset = min(offset, s.end)
	aligned := s.cfg.Base + (offset-s.cfg.Base)&^4095
	if aligned <= s.start {
		return
	}
	if err := unix.Fallocate(int(s.spool.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, aligned-s.cfg.Base); err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			s.log.Debug("spool punch", "err", err)
		}
		return
	}
	s.start = aligned
}
