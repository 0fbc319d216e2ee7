-- 0029: each session's shim socket (the document's shim_socket) in a
-- column of its own, and the live sessions indexed by it, so that a
-- booting daemon lists what it must reattach or close from one small
-- index (RecoveryStore.ListLive) without reading a document. Only
-- CreateSession and UpdateSession write it, with the document.
ALTER TABLE sessions ADD COLUMN shim_socket TEXT NOT NULL DEFAULT '';
UPDATE sessions SET shim_socket = COALESCE(json_extract(doc, '$.shim_socket'), '');
CREATE INDEX sessions_live ON sessions (state, id, shim_socket) WHERE state <> 'stopped';
