-- 0026: what each session's model calls used (docs/api.md, "Usage and
-- budgets").
--
-- usage_* are the session's own calls, tokens and cost; tree_* the same
-- of its own calls and every descendant's. Only AddUsage moves them, in
-- one transaction for the session and its ancestors; they are never read
-- from doc. The budgets are fields of doc. Constant defaults make each
-- ADD COLUMN a catalog change: no table rewrite.
ALTER TABLE sessions ADD COLUMN usage_calls BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_input BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_output BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_cache_read BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_cache_write BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_cost DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_calls BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_input BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_output BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_cache_read BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_cache_write BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tree_cost DOUBLE PRECISION NOT NULL DEFAULT 0;
