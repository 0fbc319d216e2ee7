-- 0023: a queued prompt keeps its content blocks (CONTRACT §4.7) as JSON
-- text; '' for a text prompt.
ALTER TABLE queue_entries ADD COLUMN content TEXT NOT NULL DEFAULT '';
