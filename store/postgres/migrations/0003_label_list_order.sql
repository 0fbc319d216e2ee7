-- 0003: a label filter pages in list order, from an index.
--
-- A list filtered by a label used to scan sessions in list order and probe
-- session_labels for each (fast when the label is common) or collect every
-- session with the label and sort them (fast when it is rare). Which one
-- the planner picks hangs on the statistics: right after a burst of
-- creates, before autovacuum has analyzed the tables, it collected and
-- sorted 10,000 sessions for every page of 100.
--
-- Each label row now carries its session's list key (created_at, id), and
-- the pair index is ordered by it, so ListSessions reads a label-filtered
-- page as one range of this index, whatever the statistics say. The copies
-- are written with the label rows (CreateSession, UpdateSession), the only
-- writes that change created_at; id never changes. session_pk is included
-- to join the session without a heap visit once the table is vacuumed.
ALTER TABLE session_labels
    ADD COLUMN created_at BIGINT,
    ADD COLUMN session_id TEXT COLLATE "C";

UPDATE session_labels AS l SET created_at = s.created_at, session_id = s.id
FROM sessions AS s WHERE s.pk = l.session_pk;

ALTER TABLE session_labels
    ALTER COLUMN created_at SET NOT NULL,
    ALTER COLUMN session_id SET NOT NULL;

DROP INDEX session_labels_by_pair;
CREATE INDEX session_labels_by_pair ON session_labels (key, value, created_at DESC, session_id DESC)
    INCLUDE (session_pk);
