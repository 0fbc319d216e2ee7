-- 0022: the agent's elicitations (docs/api.md, "Elicitations"), kept like permissions.
--
-- doc is the whole berth.Elicitation as JSON (its schema and content are
-- JSON already); id, turn and state are columns for the lookups. Like the
-- other side tables there is no foreign key: DeleteSession deletes the
-- rows by session_pk. ord is the arrival order.
CREATE TABLE elicitations (
    ord        INTEGER PRIMARY KEY AUTOINCREMENT,
    session_pk INTEGER NOT NULL, -- sessions.pk
    id         TEXT    NOT NULL UNIQUE,
    turn_id    TEXT    NOT NULL DEFAULT '',
    state      TEXT    NOT NULL,
    doc        TEXT    NOT NULL
);

CREATE INDEX elicitations_by_state ON elicitations (session_pk, state, ord);
