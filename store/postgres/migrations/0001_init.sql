-- 0001: sessions, their labels, their append-only event logs and turns.
--
-- The same model as the SQLite backend (store/sqlite/migrations), in one
-- step: a session is kept whole as JSON text in doc, with copies of the
-- fields lists filter and sort on beside it. last_seq is moved only by
-- AppendEvents and is never read from doc. pk is a compact key for the
-- event log; an identity column never reuses a key, even after a delete.
-- Times are BIGINT unix nanoseconds (timestamptz keeps only microseconds).
-- Ids use the "C" collation so that paging order is bytewise whatever the
-- database's locale, as in SQLite.
CREATE TABLE sessions (
    pk         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT COLLATE "C" NOT NULL UNIQUE,
    state      TEXT COLLATE "C" NOT NULL,
    agent      TEXT COLLATE "C" NOT NULL,
    parent_id  TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL, -- unix nanoseconds, 0 for the zero time
    last_seq   BIGINT NOT NULL DEFAULT 0,
    doc        TEXT   NOT NULL -- JSON text: JSONB would not keep it byte for byte
);

-- Lists are newest first; each filter has an index that also gives the order.
CREATE INDEX sessions_by_created ON sessions (created_at DESC, id DESC);
CREATE INDEX sessions_by_state ON sessions (state, created_at DESC, id DESC);
CREATE INDEX sessions_by_agent ON sessions (agent, created_at DESC, id DESC);
CREATE INDEX sessions_by_parent ON sessions (parent_id, created_at DESC, id DESC);

-- One row per label, so that a label filter is an indexed EXISTS.
CREATE TABLE session_labels (
    session_pk BIGINT NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
    key        TEXT COLLATE "C" NOT NULL,
    value      TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (session_pk, key)
);

CREATE INDEX session_labels_by_pair ON session_labels (key, value, session_pk);

-- The log. The primary key is the read path (seq > after ORDER BY seq).
-- There is deliberately no foreign key to sessions: AppendEvents checks the
-- session once per batch instead of once per row, and DeleteSession deletes
-- the log in the same transaction. data is the event's JSON as text,
-- returned exactly as it was given (JSONB would reorder keys).
CREATE TABLE events (
    session_pk BIGINT NOT NULL, -- sessions.pk
    seq        BIGINT NOT NULL,
    turn_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    type       TEXT COLLATE "C" NOT NULL,
    time       BIGINT,          -- unix nanoseconds, NULL for the zero time
    data       TEXT,            -- JSON, NULL when the event has none
    PRIMARY KEY (session_pk, seq)
);

-- Index what is rare, not every streamed chunk: agent_message and
-- agent_thought are nearly all of a busy log. A page filtered by one of
-- them is a range of the primary key instead. The WHERE clause is repeated
-- verbatim in event.go (rareTypesTerm), so the planner can prove a query
-- implies it even for a generic plan.
CREATE INDEX events_by_type ON events (session_pk, type, seq)
    WHERE type NOT IN ('agent_message', 'agent_thought');

-- Per turn, the first and last seq of its events (AppendEvents widens them,
-- one row per turn per batch): a page filtered by turn is a range of the
-- primary key (or of events_by_type) between the two.
CREATE TABLE turns (
    session_pk BIGINT NOT NULL, -- sessions.pk
    turn_id    TEXT COLLATE "C" NOT NULL,
    first_seq  BIGINT NOT NULL,
    last_seq   BIGINT NOT NULL,
    PRIMARY KEY (session_pk, turn_id)
);
