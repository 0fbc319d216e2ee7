-- 0026: what each session's model calls used (docs/api.md, "Usage and
-- budgets").
--
-- usage_* are the session's own calls, tokens and cost; tree_* the same
-- of its own calls and every descendant's. Only AddUsage moves them, in
-- one transaction for the session and its ancestors; they are never read
-- from doc. The budgets are fields of doc.
ALTER TABLE sessions ADD COLUMN usage_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_input INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_output INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_cache_read INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_cache_write INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_cost REAL NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_input INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_output INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_cache_read INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_cache_write INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_cost REAL NOT NULL DEFAULT 0;
