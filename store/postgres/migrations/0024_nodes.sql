-- 0024: the node registry of a cluster (docs/api.md, "Cluster nodes:
-- ownership and failover").
--
-- One row per node id, kept when the node leaves or is lost, so that a
-- node coming back registers in place. Times are BIGINT unix nanoseconds,
-- as in 0001.
--
-- incarnation grows each time a node that was lost (or left) registers
-- again. A lease records the incarnation of the node that took it, and a
-- heartbeat renews only the leases of the node's current incarnation: the
-- leases a lost node held stay expired, for the node that took on the
-- takeover, even once the lost node is back and beating.
CREATE TABLE nodes (
    id             TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    advertise      TEXT   NOT NULL,
    state          TEXT COLLATE "C" NOT NULL, -- up, lost or left
    incarnation    BIGINT NOT NULL,
    started_at     BIGINT,                    -- NULL for the zero time
    last_heartbeat BIGINT NOT NULL
);

-- MarkLostNodes reads the up nodes by heartbeat.
CREATE INDEX nodes_by_heartbeat ON nodes (state, last_heartbeat);

-- 0 for a lease taken by an owner that is not a registered node.
ALTER TABLE leases ADD COLUMN incarnation BIGINT NOT NULL DEFAULT 0;

-- Heartbeat, LeasesOf and ListNodes read a node's leases.
CREATE INDEX leases_by_owner ON leases (owner, session_pk);
