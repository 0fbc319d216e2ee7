package objstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-sh/berth/internal/ids"
)

// Deleted removes session id's own objects from the store — its
// state.json, checkpoints and snapshots (sessions/<id>/) — in the
// background, retried as a write is; the contents other sessions may
// name too (blobs, packs) stay. The deletion is remembered in
// SyncerOptions.DeletedDir until it is done, so that a daemon stopped
// before it finishes it at its next start. A write of the session under
// way ends first: none comes after.
func (s *Syncer) Deleted(id string) {
	if !ids.ValidName(id) {
		return
	}
	s.remember(id)
	s.queueDeletion(id)
	s.signal()
}

// queueDeletion marks session id to be removed from the store next.
func (s *Syncer) queueDeletion(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	st := s.sessions[id]
	if st == nil {
		st = &syncState{}
		s.sessions[id] = st
	}
	// Its lag no longer counts; no delay: it goes before the writes.
	st.deleting, st.dirty, st.since = true, true, time.Time{}
	st.retryAt, st.failures = time.Time{}, 0
}

// remove removes session id's objects, then forgets the deletion.
func (s *Syncer) remove(id string) error {
	n, err := s.opts.Uploader.Client().DeletePrefix(s.ctx, SessionKey(id))
	if err != nil {
		return err
	}
	s.opts.Logger.Debug("object store: a deleted session's objects removed", "session", id, "objects", n)
	if dir := s.opts.DeletedDir; dir != "" {
		if err := os.Remove(filepath.Join(dir, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.opts.Logger.Warn("object store: a done deletion not forgotten", "session", id, "err", err)
		}
	}
	return nil
}

// remember writes the deletion of session id into DeletedDir.
func (s *Syncer) remember(id string) {
	dir := s.opts.DeletedDir
	if dir == "" {
		return
	}
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, id), nil, 0o600)
	}
	if err != nil {
		s.opts.Logger.Warn("object store: a session's deletion not remembered (a restart before it is done leaves its objects)", "session", id, "err", err)
	}
}

// resumeDeletions queues the deletions DeletedDir remembers.
func (s *Syncer) resumeDeletions() {
	if s.opts.DeletedDir == "" {
		return
	}
	entries, err := os.ReadDir(s.opts.DeletedDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.opts.Logger.Warn("object store: the deletions not done are not read", "err", err)
		}
		return
	}
	for _, e := range entries {
		if e.Type().IsRegular() && ids.ValidName(e.Name()) {
			s.queueDeletion(e.Name())
		}
	}
}
