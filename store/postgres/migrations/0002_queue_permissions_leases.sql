-- 0002: prompt queues, permission requests and session leases.
--
-- All three belong to a session by its pk and go with it: ON DELETE CASCADE
-- on sessions (pk), so DeleteSession removes them in its own transaction
-- (unlike events, these tables are small and written one row at a time, so
-- the foreign key costs nothing that matters). Ids use the "C" collation
-- and times are BIGINT unix nanoseconds, as in 0001.

-- Queue entries. ord is the arrival order: an identity, never the clock
-- (an entry enqueued later may carry an earlier created_at). An entry
-- leaves pending exactly once, to dispatched or canceled, and stays as a
-- record; ids are unique store-wide, like session ids.
CREATE TABLE queue_entries (
    ord        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT COLLATE "C" NOT NULL UNIQUE,
    session_pk BIGINT NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
    kind       TEXT COLLATE "C" NOT NULL,
    text       TEXT   NOT NULL,
    generation BIGINT NOT NULL,
    state      TEXT COLLATE "C" NOT NULL,
    turn_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at BIGINT           -- unix nanoseconds, NULL for the zero time
);

-- Counting and claiming a session's pending entries of one kind read one
-- range of this index, in arrival order; listing and canceling read the
-- session's pending range. It also serves the cascade from sessions.
CREATE INDEX queue_entries_by_session ON queue_entries (session_pk, state, kind, ord);

-- Permission requests. ord keeps creation order for lists, as for the
-- queue. tool_call and options are JSON text (JSONB would not keep the
-- tool call byte for byte). decided_at is NULL until a decision.
CREATE TABLE permissions (
    ord        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT COLLATE "C" NOT NULL UNIQUE,
    session_pk BIGINT NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
    turn_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    tool_call  TEXT,            -- JSON, NULL when the request has none
    options    TEXT   NOT NULL, -- JSON array of berth.PermissionOption
    state      TEXT COLLATE "C" NOT NULL,
    option_id  TEXT COLLATE "C" NOT NULL DEFAULT '',
    decided_by TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at BIGINT,          -- unix nanoseconds, NULL for the zero time
    decided_at BIGINT           -- unix nanoseconds, NULL until decided
);

CREATE INDEX permissions_by_session ON permissions (session_pk, state, ord);

-- Leases: at most one row per session. token is a fencing token that must
-- never go back, so a release does not delete the row: it empties owner
-- (and the row then reads as "no lease"). The next acquire takes the row
-- over and grows the token from where it was. Only DeleteSession (by the
-- cascade) removes the row, and with it the session the tokens fenced.
CREATE TABLE leases (
    session_pk BIGINT NOT NULL PRIMARY KEY REFERENCES sessions (pk) ON DELETE CASCADE,
    owner      TEXT COLLATE "C" NOT NULL, -- '' once released
    token      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL            -- unix nanoseconds
);
