// Package client is the Go client of a berth daemon's HTTP API, over TCP
// or the daemon's Unix socket.
//
// A Client implements berth.SessionService, the interface the daemon's
// session manager implements: code written against the interface (the
// berth CLI, an HTTP server in front of it, tests) drives a daemon in
// another process through a Client, or one in the same process (package
// daemon) through its manager, alike. Every route of the JSON API has a
// method: sessions, prompts and turns, the queue, permissions, exec,
// snapshots, repair, children, hooks and their deliveries, the web UI's
// sign-in codes, the OpenAPI document; Do sends any request and keeps the
// answer verbatim when asked.
//
// Errors carry the daemon's code: an error answer decodes into a
// *berth.Error with its code, message and details, so berth.ErrorCode and
// errors.As work as on the manager's errors; a daemon that does not answer
// is berth.EUnavailable; the caller's own cancellation stays ctx.Err().
//
// Streams: StreamEvents (a session's log) and StreamChanges (every
// session's changes) return the berth.EventStream and berth.ChangeStream
// of the interface; Events, EventsRaw and Changes are the same as range
// iterators. A dropped connection is not an error: the stream reconnects
// with Last-Event-ID set to the last event it returned (see WithReconnect),
// so nothing is missed and nothing repeats. Streams start no goroutine: the
// context of a call ends a blocked read by closing its connection, and
// Close (or breaking out of an iterator) releases it.
//
// Addresses: "host:port" or "http(s)://host:port" for TCP, "unix:PATH" for
// the socket, "" for the daemon of the berth home ($BERTH_HOME, else
// ~/.berth). Over TCP to a loopback address the client sends the token the
// daemon keeps in its home unless WithToken gives one.
package client
