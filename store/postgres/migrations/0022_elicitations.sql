-- 0022: the agent's elicitations (docs/api.md, "Elicitations"), kept like permissions.
--
-- doc is the whole berth.Elicitation as JSON (its schema and content are
-- JSON already); id, turn and state are columns for the lookups. ord is
-- the arrival order.
CREATE TABLE elicitations (
    ord        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT COLLATE "C" NOT NULL UNIQUE,
    session_pk BIGINT NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
    turn_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    state      TEXT COLLATE "C" NOT NULL,
    doc        TEXT NOT NULL
);

CREATE INDEX elicitations_by_session ON elicitations (session_pk, state, ord);
