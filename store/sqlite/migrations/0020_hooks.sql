-- 0020: the hooks' durable outbox (docs/api.md, "Hooks").
--
-- Numbered apart from the session schema's own line of migrations so that
-- it never collides with one added beside it.
--
-- hook_deliveries holds one row per (hook, session, seq, event): its body
-- is fixed when it is enqueued, so every retry sends the same bytes. Rows
-- belong to no session row (no foreign key): a delivery about a session
-- that was deleted is still delivered. ord is the arrival order, which is
-- also each session's delivery order to one hook. Times are unix
-- nanoseconds; claimed_until 0 means unclaimed.
CREATE TABLE hook_deliveries (
    ord             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    hook            TEXT    NOT NULL,
    hook_index      INTEGER NOT NULL,
    event           TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    state           TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NOT NULL DEFAULT '',
    next_attempt_at INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER,
    claimed_by      TEXT    NOT NULL DEFAULT '',
    claimed_until   INTEGER NOT NULL DEFAULT 0,
    body            BLOB    NOT NULL,
    UNIQUE (hook, session_id, seq, event)
);

-- A session's queue to one hook, in order: finding its head is one seek.
CREATE INDEX hook_deliveries_queue ON hook_deliveries (hook, session_id, state, ord);
-- The due deliveries of one hook.
CREATE INDEX hook_deliveries_due ON hook_deliveries (state, hook, next_attempt_at);
-- Lists by state, newest first, and pruning.
CREATE INDEX hook_deliveries_by_state ON hook_deliveries (state, ord);

-- How far the hooks have read each session's log, and the last badge seen.
CREATE TABLE hook_cursors (
    session_id TEXT    NOT NULL PRIMARY KEY,
    seq        INTEGER NOT NULL,
    badge      TEXT    NOT NULL DEFAULT ''
);

-- Small facts about the hooks' state ("cursors" once InitHookCursors ran).
CREATE TABLE hook_meta (
    key   TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);
