-- 0028: how far the object store has each session (docs/api.md, "Session
-- state in an object store"): the seq of the turn_ended its state.json
-- was written after, and when (unix nanoseconds); 0 for never. Only
-- SetStorageSynced moves them, forward only; they are never read from doc.
ALTER TABLE sessions ADD COLUMN storage_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN storage_at INTEGER NOT NULL DEFAULT 0;
