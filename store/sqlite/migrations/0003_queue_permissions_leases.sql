-- 0003: what a session keeps beside its log: its input queue, its
-- permission requests and the lease of the node that runs it.
--
-- Like events and turns, these tables have no foreign key to sessions:
-- DeleteSession deletes their rows by session_pk in its own transaction.
-- Entry and permission ids are unique in the whole store, not just in
-- their session (the daemon makes them globally unique), so "the id exists"
-- means the same in every backend; lookups still name the session too.

-- Input entries. ord is the arrival order: entries are served by it, never
-- by created_at, which is the caller's clock and may go back. AUTOINCREMENT:
-- an ord is never reused, so a newer entry always sorts after an older one.
-- Rows that left pending (dispatched, canceled) stay as history until the
-- session is deleted.
CREATE TABLE queue_entries (
    ord        INTEGER PRIMARY KEY AUTOINCREMENT,
    session_pk INTEGER NOT NULL, -- sessions.pk
    id         TEXT    NOT NULL UNIQUE,
    kind       TEXT    NOT NULL, -- queue or steer
    state      TEXT    NOT NULL, -- pending, dispatched or canceled
    generation INTEGER NOT NULL,
    turn_id    TEXT    NOT NULL DEFAULT '',
    text       TEXT    NOT NULL,
    created_at INTEGER           -- unix nanoseconds, NULL for the zero time
);

-- Claim (the oldest pending entry of a kind), the queue cap (a count of
-- pending entries of a kind) and the pending list are ranges of this index.
CREATE INDEX queue_by_state ON queue_entries (session_pk, state, kind, ord);

-- Permission requests, listed in arrival order (ord) like the queue. The
-- index also serves DeleteSession's delete by session_pk.
CREATE TABLE permissions (
    ord        INTEGER PRIMARY KEY AUTOINCREMENT,
    session_pk INTEGER NOT NULL, -- sessions.pk
    id         TEXT    NOT NULL UNIQUE,
    turn_id    TEXT    NOT NULL DEFAULT '',
    state      TEXT    NOT NULL,
    tool_call  TEXT,             -- JSON, NULL when there is none
    options    TEXT    NOT NULL, -- JSON array of berth.PermissionOption
    option_id  TEXT    NOT NULL DEFAULT '',
    decided_by TEXT    NOT NULL DEFAULT '',
    created_at INTEGER,          -- unix nanoseconds, NULL for the zero time
    decided_at INTEGER           -- unix nanoseconds, NULL until decided
);

CREATE INDEX permissions_by_state ON permissions (session_pk, state, ord);

-- Leases, at most one row per session. The row's rowid is the fencing
-- token: a new holder (the first, or one taking an expired lease over)
-- deletes the old row and inserts a new one, and AUTOINCREMENT hands out a
-- rowid larger than any it ever gave (sqlite_sequence keeps the high-water
-- mark). So tokens never go back: not after a release, which deletes the
-- row, and not after the session is deleted and one of the same id is
-- created. A renewal by the holder updates expires_at in place and keeps
-- the token. Tokens are unique across sessions, so they grow by more than
-- one.
CREATE TABLE leases (
    token      INTEGER PRIMARY KEY AUTOINCREMENT,
    session_pk INTEGER NOT NULL UNIQUE, -- sessions.pk
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL         -- unix nanoseconds
);
