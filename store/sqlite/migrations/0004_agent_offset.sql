-- 0004: how far into the agent's stdout stream the daemon has durably got.
--
-- agent_offset is the highest berth.Event.Source committed for the
-- session. Like last_seq it is moved only by AppendEvents, in the same
-- statement and so the same transaction as the events, and is never read
-- from doc.
ALTER TABLE sessions ADD COLUMN agent_offset INTEGER NOT NULL DEFAULT 0;
