-- 0027: the browser sign-ins (docs/api.md, "Sign-in and browser safety"),
-- shared by every node of the store, so that one outlives a daemon
-- restart and works on every node.
--
-- Nothing here signs a browser in or gives the token away: id is the
-- SHA-256 of the random id the cookie holds, token a fingerprint (an
-- HMAC-SHA256 keyed with the token) of the token the sign-in was made
-- with. expires_at is BIGINT unix nanoseconds, as in 0001; its index
-- serves the sweep of the expired ones.
CREATE TABLE signins (
    id         BYTEA  NOT NULL PRIMARY KEY,
    token      BYTEA  NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE INDEX signins_by_expiry ON signins (expires_at);
