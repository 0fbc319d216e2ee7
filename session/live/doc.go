// Package live runs one session whose agent is alive: its wire to the
// agent (ACP over the shim's pipes), its turns and input queue, the
// agent's questions (permissions, elicitations), its files, terminals and
// controls, and its sandbox. A live.Session reaches the rest of berth only
// through Host (host.go), the seam to whoever owns the set of sessions
// (session.Manager); its locks are ordered once, on Session
// (session.go). docs/architecture.md draws where it sits.
package live
