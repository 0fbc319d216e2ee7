-- 0002: index what is rare, not every streamed chunk.
--
-- agent_message and agent_thought chunks are nearly all of a busy log, and
-- maintaining two more B-trees for each cost a quarter of the write path
-- (BenchmarkAppendEvents, one session: 272k events/s with the full
-- indexes, 362k with none).
--
-- * events_by_type now leaves those two types out. A page filtered by one
--   of them is a range of the primary key instead: they are dense, so it
--   reads little that it does not return. The WHERE clause is repeated
--   verbatim in event.go (rareTypesTerm); the queries name the index, so a
--   mismatch fails loudly at Open.
-- * events_by_turn goes. The turns table keeps, per turn, the first and
--   last seq of its events (AppendEvents moves them, one row per turn per
--   batch), and a page filtered by turn is a range of the primary key (or
--   of events_by_type) between the two.
DROP INDEX events_by_type;
DROP INDEX events_by_turn;
CREATE INDEX events_by_type ON events (session_pk, type, seq)
    WHERE type NOT IN ('agent_message', 'agent_thought');

CREATE TABLE turns (
    session_pk INTEGER NOT NULL, -- sessions.pk
    turn_id    TEXT    NOT NULL,
    first_seq  INTEGER NOT NULL,
    last_seq   INTEGER NOT NULL,
    PRIMARY KEY (session_pk, turn_id)
) WITHOUT ROWID;

INSERT INTO turns (session_pk, turn_id, first_seq, last_seq)
    SELECT session_pk, turn_id, min(seq), max(seq) FROM events WHERE turn_id != '' GROUP BY session_pk, turn_id;
