-- 0030: what a session's badge depends on besides its state, agent and
-- spending (its stop reason, failure, waits, missing credential, auth,
-- budgets) in columns of their own, so that CountSessions — a metrics
-- scrape, also while a boot reattaches — reads no document. Only
-- CreateSession and UpdateSession write them, with the document. The
-- budgets are the document's JSON text, NULL for none.
ALTER TABLE sessions ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN failed BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN waiting BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN auth_missing BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN needs_auth BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN max_cost TEXT;
ALTER TABLE sessions ADD COLUMN max_tokens TEXT;
UPDATE sessions SET
	stop_reason = COALESCE(doc::jsonb->>'stop_reason', ''),
	failed = doc::jsonb->>'failure' IS NOT NULL,
	waiting = COALESCE((doc::jsonb->>'pending_permissions')::bigint, 0) > 0
		OR COALESCE((doc::jsonb->>'pending_elicitations')::bigint, 0) > 0,
	auth_missing = COALESCE(doc::jsonb->'auth'->>'missing', '') <> '',
	needs_auth = COALESCE((doc::jsonb->>'needs_auth')::boolean, false),
	max_cost = (doc::jsonb->'max_cost_usd')::text,
	max_tokens = (doc::jsonb->'max_tokens')::text;
