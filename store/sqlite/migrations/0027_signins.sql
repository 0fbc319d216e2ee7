-- 0027: the browser sign-ins (docs/api.md, "Sign-in and browser safety"),
-- so that one outlives a daemon restart.
--
-- Nothing here signs a browser in or gives the token away: id is the
-- SHA-256 of the random id the cookie holds, token a fingerprint (an
-- HMAC-SHA256 keyed with the token) of the token the sign-in was made
-- with. expires_at is unix nanoseconds; its index serves the sweep of the
-- expired ones.
CREATE TABLE signins (
    id         BLOB    NOT NULL PRIMARY KEY,
    token      BLOB    NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX signins_by_expiry ON signins (expires_at);
