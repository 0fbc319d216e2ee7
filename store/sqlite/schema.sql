-- schema as of migration 30
-- A new store's schema: what every migration up to that one makes, in one
-- script. Written by `go test ./store/sqlite -run TestTheSchemaIsTheMigrations
-- -update`, never by hand; migrations/ stays the history a store upgrades by.

CREATE TABLE sessions (
    pk         INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL UNIQUE,
    state      TEXT    NOT NULL,
    agent      TEXT    NOT NULL,
    parent_id  TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL, -- unix nanoseconds, 0 for the zero time
    last_seq   INTEGER NOT NULL DEFAULT 0,
    doc        TEXT    NOT NULL
, agent_offset INTEGER NOT NULL DEFAULT 0, root_id TEXT NOT NULL DEFAULT '', spawn_key TEXT NOT NULL DEFAULT '', usage_calls INTEGER NOT NULL DEFAULT 0, usage_input INTEGER NOT NULL DEFAULT 0, usage_output INTEGER NOT NULL DEFAULT 0, usage_cache_read INTEGER NOT NULL DEFAULT 0, usage_cache_write INTEGER NOT NULL DEFAULT 0, usage_cost REAL NOT NULL DEFAULT 0, tree_calls INTEGER NOT NULL DEFAULT 0, tree_input INTEGER NOT NULL DEFAULT 0, tree_output INTEGER NOT NULL DEFAULT 0, tree_cache_read INTEGER NOT NULL DEFAULT 0, tree_cache_write INTEGER NOT NULL DEFAULT 0, tree_cost REAL NOT NULL DEFAULT 0, storage_seq INTEGER NOT NULL DEFAULT 0, storage_at INTEGER NOT NULL DEFAULT 0, shim_socket TEXT NOT NULL DEFAULT '', stop_reason TEXT NOT NULL DEFAULT '', failed INTEGER NOT NULL DEFAULT 0, waiting INTEGER NOT NULL DEFAULT 0, auth_missing INTEGER NOT NULL DEFAULT 0, needs_auth INTEGER NOT NULL DEFAULT 0, max_cost TEXT, max_tokens TEXT);

CREATE INDEX sessions_by_created ON sessions (created_at DESC, id DESC);

CREATE INDEX sessions_by_state ON sessions (state, created_at DESC, id DESC);

CREATE INDEX sessions_by_agent ON sessions (agent, created_at DESC, id DESC);

CREATE INDEX sessions_by_parent ON sessions (parent_id, created_at DESC, id DESC);

CREATE TABLE session_labels (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;

CREATE INDEX session_labels_by_pair ON session_labels (key, value, session_id);

CREATE TABLE events (
    session_pk INTEGER NOT NULL, -- sessions.pk
    seq        INTEGER NOT NULL,
    turn_id    TEXT    NOT NULL DEFAULT '',
    type       TEXT    NOT NULL,
    time       INTEGER,          -- unix nanoseconds, NULL for the zero time
    data       TEXT,             -- JSON, NULL when the event has none
    PRIMARY KEY (session_pk, seq)
) WITHOUT ROWID;

CREATE INDEX events_by_type ON events (session_pk, type, seq)
    WHERE type NOT IN ('agent_message', 'agent_thought');

CREATE TABLE turns (
    session_pk INTEGER NOT NULL, -- sessions.pk
    turn_id    TEXT    NOT NULL,
    first_seq  INTEGER NOT NULL,
    last_seq   INTEGER NOT NULL,
    PRIMARY KEY (session_pk, turn_id)
) WITHOUT ROWID;

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
, content TEXT NOT NULL DEFAULT '');

CREATE INDEX queue_by_state ON queue_entries (session_pk, state, kind, ord);

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

CREATE TABLE leases (
    token      INTEGER PRIMARY KEY AUTOINCREMENT,
    session_pk INTEGER NOT NULL UNIQUE, -- sessions.pk
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL         -- unix nanoseconds
, incarnation INTEGER NOT NULL DEFAULT 0);

CREATE INDEX sessions_by_root ON sessions (root_id, created_at DESC, id DESC);

CREATE UNIQUE INDEX sessions_by_spawn_key ON sessions (parent_id, spawn_key) WHERE spawn_key <> '';

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

CREATE INDEX hook_deliveries_queue ON hook_deliveries (hook, session_id, state, ord);

CREATE INDEX hook_deliveries_due ON hook_deliveries (state, hook, next_attempt_at);

CREATE INDEX hook_deliveries_by_state ON hook_deliveries (state, ord);

CREATE TABLE hook_cursors (
    session_id TEXT    NOT NULL PRIMARY KEY,
    seq        INTEGER NOT NULL,
    badge      TEXT    NOT NULL DEFAULT ''
);

CREATE TABLE hook_meta (
    key   TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE elicitations (
    ord        INTEGER PRIMARY KEY AUTOINCREMENT,
    session_pk INTEGER NOT NULL, -- sessions.pk
    id         TEXT    NOT NULL UNIQUE,
    turn_id    TEXT    NOT NULL DEFAULT '',
    state      TEXT    NOT NULL,
    doc        TEXT    NOT NULL
);

CREATE INDEX elicitations_by_state ON elicitations (session_pk, state, ord);

CREATE TABLE nodes (
    id             TEXT    NOT NULL PRIMARY KEY,
    advertise      TEXT    NOT NULL,
    state          TEXT    NOT NULL, -- up, lost or left
    incarnation    INTEGER NOT NULL,
    started_at     INTEGER,          -- unix nanoseconds, NULL for the zero time
    last_heartbeat INTEGER NOT NULL  -- unix nanoseconds
);

CREATE INDEX leases_by_owner ON leases (owner);

CREATE TABLE signins (
    id         BLOB    NOT NULL PRIMARY KEY,
    token      BLOB    NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX signins_by_expiry ON signins (expires_at);

CREATE INDEX sessions_live ON sessions (state, id, shim_socket) WHERE state <> 'stopped';

CREATE INDEX sessions_tally ON sessions (state, agent, stop_reason, failed, waiting, auth_missing, needs_auth,
	max_cost, max_tokens, usage_calls, usage_input, usage_output, usage_cache_read, usage_cache_write, usage_cost,
	tree_calls, tree_input, tree_output, tree_cache_read, tree_cache_write, tree_cost, id);
