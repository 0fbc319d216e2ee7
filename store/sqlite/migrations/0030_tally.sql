-- 0030: what a session's badge depends on besides its state, agent and
-- spending (its stop reason, failure, waits, missing credential, auth,
-- budgets) in columns of their own, so that CountSessions — a metrics
-- scrape, also while a boot reattaches — reads no document. Only
-- CreateSession and UpdateSession write them, with the document. The
-- budgets are the document's JSON text, NULL for none. An index holds
-- every column the count reads, so that it reads no session's row: a
-- booting daemon's first scrape reads a few pages of it, not the table.
ALTER TABLE sessions ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN failed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN auth_missing INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN needs_auth INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN max_cost TEXT;
ALTER TABLE sessions ADD COLUMN max_tokens TEXT;
UPDATE sessions SET
	stop_reason = COALESCE(json_extract(doc, '$.stop_reason'), ''),
	failed = json_extract(doc, '$.failure') IS NOT NULL,
	waiting = COALESCE(json_extract(doc, '$.pending_permissions'), 0) > 0
		OR COALESCE(json_extract(doc, '$.pending_elicitations'), 0) > 0,
	auth_missing = COALESCE(json_extract(doc, '$.auth.missing'), '') <> '',
	needs_auth = COALESCE(json_extract(doc, '$.needs_auth'), 0) <> 0,
	max_cost = doc -> '$.max_cost_usd',
	max_tokens = doc -> '$.max_tokens';
CREATE INDEX sessions_tally ON sessions (state, agent, stop_reason, failed, waiting, auth_missing, needs_auth,
	max_cost, max_tokens, usage_calls, usage_input, usage_output, usage_cache_read, usage_cache_write, usage_cost,
	tree_calls, tree_input, tree_output, tree_cache_read, tree_cache_write, tree_cost, id);
