-- 0005: session trees (docs/api.md, "Children").
--
-- root_id is the id of the session's tree's root (its own for a root), so
-- that ?root= lists a whole tree from an index. spawn_key is the
-- Idempotency-Key a child was spawned with: unique among the children of
-- one parent, so two racing retries cannot both create one. Both are
-- copies of the document's fields, like parent_id. Every session stored
-- before this version is a root.
ALTER TABLE sessions ADD COLUMN root_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN spawn_key TEXT NOT NULL DEFAULT '';
UPDATE sessions SET root_id = id WHERE root_id = '';

CREATE INDEX sessions_by_root ON sessions (root_id, created_at DESC, id DESC);
CREATE UNIQUE INDEX sessions_by_spawn_key ON sessions (parent_id, spawn_key) WHERE spawn_key <> '';
