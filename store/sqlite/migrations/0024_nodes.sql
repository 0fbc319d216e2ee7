-- 0024: the node registry (docs/api.md, "Nodes"). A SQLite store has one
-- node, but implements the registry as the PostgreSQL store does, so
-- that both pass one conformance suite and `berth nodes` lists this one.
--
-- incarnation grows each time a node that was lost (or left) registers
-- again. A lease records the incarnation of the node that took it, and a
-- heartbeat renews only the leases of the node's current incarnation.
CREATE TABLE nodes (
    id             TEXT    NOT NULL PRIMARY KEY,
    advertise      TEXT    NOT NULL,
    state          TEXT    NOT NULL, -- up, lost or left
    incarnation    INTEGER NOT NULL,
    started_at     INTEGER,          -- unix nanoseconds, NULL for the zero time
    last_heartbeat INTEGER NOT NULL  -- unix nanoseconds
);

-- 0 for a lease taken by an owner that is not a registered node.
ALTER TABLE leases ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0;

CREATE INDEX leases_by_owner ON leases (owner);
