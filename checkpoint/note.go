package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/ids"
)

// noteFile is the name, in a session's directory, of the text its agent's
// next prompt begins with (a rewind's notice, a fork's earlier turns).
const noteFile = "next-prompt.note"

// maxNoteBytes bounds a session's note.
const maxNoteBytes = 4 << 20

// AddNote appends text to what the session's next prompt begins with. It
// is on disk, so a daemon restarted before that prompt still sends it.
func (s *Store) AddNote(sessionID, text string) error {
	if !ids.ValidName(sessionID) {
		return berth.Errorf(berth.EInvalid, "invalid session id")
	}
	// No sweep takes its temporary file for a crash's.
	s.gc.RLock()
	defer s.gc.RUnlock()
	dir := s.sessionDir(sessionID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot write the note")
	}
	old, err := os.ReadFile(filepath.Join(dir, noteFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return berth.WrapError(berth.EInternal, err, "cannot read the note")
	}
	b := append(old, text...)
	if len(b) > maxNoteBytes {
		b = b[len(b)-maxNoteBytes:]
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, noteFile), b); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot write the note")
	}
	return nil
}

// TakeNote returns the session's note and removes it; "" when it has none.
func (s *Store) TakeNote(sessionID string) string {
	if !ids.ValidName(sessionID) {
		return ""
	}
	p := filepath.Join(s.sessionDir(sessionID), noteFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	_ = os.Remove(p)
	return string(b)
}
