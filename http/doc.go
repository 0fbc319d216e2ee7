// Package http is berth's HTTP edge: the API server over a
// berth.SessionService (JSON, Server-Sent Events, bearer auth, a TCP
// listener and a Unix socket). It is the only place on the daemon's side
// that turns error codes into HTTP statuses; package client is the other
// end of the wire (the Go client the CLI uses), and turns them back.
//
// Where things are: server.go makes the Server and runs its lifecycle;
// middleware.go, conns.go, guard.go, auth.go and forward.go are the chain
// every request goes through, in the order NewServer writes it; routes.go
// registers every route, each on the handler type of its area: sessions
// (sessions.go, children.go), conversation (conversation.go, prompts.go,
// turns.go, queue.go), events (events.go, sse.go, global_stream.go), asks
// (asks.go, elicitations.go), workspace (workspace.go, checkpoints.go),
// signIn (login.go, signin.go), daemonInfo (daemon.go, nodes.go, hooks.go,
// metrics.go, openapi.go) and ui (ui.go). Each holds the edge (edge.go,
// errors.go, decode.go) and an interface of the few service methods it
// calls. tools.go serves a session's tools socket, apart from the API.
//
// Where docs/api.md says no more, the server does this:
//
//   - A known path with the wrong method answers 405 with an Allow header
//     and the error code invalid_argument (the code set is closed); an
//     unknown path answers 404 not_found. Both sit behind auth.
//   - GET /v1/sessions/{id}/events clamps limit to 1000 (0 or absent: 100);
//     a negative or non-integer after or limit is 400.
//   - Request bodies are capped at 6 × limits.max_prompt_bytes + 64 KiB
//     (room for the worst JSON escaping of a prompt at the cap); past it,
//     413. A prompt over the cap is 413 with details {max_bytes, bytes}.
//   - Unknown query parameters are ignored; unknown JSON fields are 400.
//   - POST …/prompts?wait=true for a prompt that was queued or staged waits
//     on its entry id (the service resolves it to the turn that runs it).
//   - SSE: when the log cannot be read any more after the stream began, the
//     server writes an "error" event (no id) whose data is the API's error
//     JSON, then ends the response. When the daemon shuts down, open streams
//     are dropped (the connection is cut, not ended), so that clients
//     reconnect with Last-Event-ID; a stream that ends cleanly means the
//     session is stopped and every event was sent.
//   - Requests cut short by the shutdown (a prompt wait) answer 503
//     unavailable.
package http
