-- 0025: the user's credentials (docs/api.md, Credentials), shared by every
-- node of the store.
--
-- A value is never stored as it is: sealed is AES-256-GCM of it under the
-- key each node reads from [credentials] key_file, with a nonce of its own
-- and the name and kind as additional data, so a row copied under another
-- name does not open. key_id is the first bytes of the key's SHA-256, to
-- tell a node with another key from a damaged row. Times are BIGINT unix
-- nanoseconds, as in 0001.
CREATE TABLE credentials (
    name         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    kind         TEXT  NOT NULL,
    key_id       TEXT  NOT NULL,
    nonce        BYTEA NOT NULL,
    sealed       BYTEA NOT NULL,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT           -- NULL until the value is first read
);
