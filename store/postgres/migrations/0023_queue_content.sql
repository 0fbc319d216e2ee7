-- 0023: a queued prompt keeps its content blocks (docs/api.md, "Prompt content") as JSON
-- text; '' for a text prompt.
ALTER TABLE queue_entries ADD COLUMN content TEXT NOT NULL DEFAULT '';
