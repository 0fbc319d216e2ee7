-- 0001: sessions, their labels and their append-only event logs.

-- A session is kept whole as JSON in doc; the columns beside it are copies
-- of the fields lists filter and sort on. last_seq is moved only by
-- AppendEvents and is never read from doc. pk is a compact key for the
-- event log: an integer instead of the id text in every event and index
-- entry makes the log's B-trees smaller and their comparisons cheaper.
-- AUTOINCREMENT: a key is never reused, even after a delete.
CREATE TABLE sessions (
    pk         INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL UNIQUE,
    state      TEXT    NOT NULL,
    agent      TEXT    NOT NULL,
    parent_id  TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL, -- unix nanoseconds, 0 for the zero time
    last_seq   INTEGER NOT NULL DEFAULT 0,
    doc        TEXT    NOT NULL
);

-- Lists are newest first; each filter has an index that also gives the order.
CREATE INDEX sessions_by_created ON sessions (created_at DESC, id DESC);
CREATE INDEX sessions_by_state ON sessions (state, created_at DESC, id DESC);
CREATE INDEX sessions_by_agent ON sessions (agent, created_at DESC, id DESC);
CREATE INDEX sessions_by_parent ON sessions (parent_id, created_at DESC, id DESC);

-- One row per label, so that a label filter is an indexed EXISTS.
CREATE TABLE session_labels (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;

CREATE INDEX session_labels_by_pair ON session_labels (key, value, session_id);

-- The log. The primary key is the read path (seq > after ORDER BY seq), so
-- the table is clustered on it. There is deliberately no foreign key to
-- sessions: AppendEvents checks the session once per batch instead of once
-- per row, and DeleteSession deletes the log in the same transaction.
CREATE TABLE events (
    session_pk INTEGER NOT NULL, -- sessions.pk
    seq        INTEGER NOT NULL,
    turn_id    TEXT    NOT NULL DEFAULT '',
    type       TEXT    NOT NULL,
    time       INTEGER,          -- unix nanoseconds, NULL for the zero time
    data       TEXT,             -- JSON, NULL when the event has none
    PRIMARY KEY (session_pk, seq)
) WITHOUT ROWID;

CREATE INDEX events_by_type ON events (session_pk, type, seq);
CREATE INDEX events_by_turn ON events (session_pk, turn_id, seq);
