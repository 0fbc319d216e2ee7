package shim

// The spool: the agent's stdout appended to a file at its stream offset,
// read back by the daemon connection from wherever a daemon stands, and
// punched out below what a daemon has durably processed.

import (
	"errors"

	"golang.org/x/sys/unix"
)

// pumpStdout spools the agent's stdout line by line (see lines), learning
// the requests in it.
func (s *server) pumpStdout() {
	defer s.wg.Done()
	out := s.proc.Stdout()
	buf := make([]byte, 256<<10)
	lw := &lines{s: s, pos: s.cfg.Base, max: s.cfg.maxLine()}
	for {
		n, err := out.Read(buf)
		if n > 0 {
			lw.write(buf[:n])
		}
		if err != nil {
			lw.eof()
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
	s.win.forget(aligned)
}
