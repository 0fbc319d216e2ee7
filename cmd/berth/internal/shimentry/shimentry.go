// Package shimentry runs `berth shim-local` — the shim of a host or bwrap
// session, for a berth built without the small shim (a plain `go build`,
// `go install` or `go run`) — from an init function, before the packages
// only the daemon and the CLI use are initialised, and exits.
//
// Go initialises a package once everything it imports is, choosing among
// the ready ones by import path; so this package's init runs as soon as
// package shimcmd's imports are done, and those are kept to standard
// packages that initialise early (no net, net/netip, net/url: see
// internal/unixsock and internal/core). The daemon's libraries (the Docker
// client's reference grammar, the S3 client, Prometheus, JSON Schema, the
// CLI) would otherwise leave about a megabyte of regular expressions and
// tables in every shim's heap, for its whole life, and cost its start a
// few milliseconds. TestShimLocalSkipsTheDaemonsLibraries checks the order.
//
// cmd/berth imports it first, for its side effect.
package shimentry

import (
	"os"

	"github.com/berth-sh/berth/shim/shimcmd"
)

// Role is the hidden command a daemon without the small shim runs its
// host and bwrap sessions' shims with.
const Role = "shim-local"

func init() {
	if len(os.Args) < 2 || os.Args[1] != Role {
		return
	}
	os.Exit(shimcmd.Main("berth "+Role, os.Args[2:]))
}
