// Package childentry runs the programs a berth daemon starts beside each
// agent, and which live as long as it, from an init function — before
// the packages only the daemon and the CLI use are initialised — and
// exits:
//
//   - `berth shim-local`, the shim of a host or bwrap session for a berth
//     built without the small shim (a plain `go build`, `go install` or
//     `go run`);
//   - `berth agent-exec`, the gateway and egress relay an agent in an
//     isolating sandbox runs under (package gateway/relay), in the form
//     the daemon writes it; any other form goes to the command tree;
//   - `berth mcp`, the berth MCP server as the agent starts it: a relay
//     to the daemon's (package mcprelay), with no argument.
//
// Go initialises a package once everything it imports is, choosing among
// the ready ones by import path; so this package's init runs as soon as
// shimcmd's and relay's imports are done, and those are kept to standard
// packages that initialise early (no net, net/netip, net/url: see
// internal/rawsock and internal/core). The daemon's libraries (the Docker
// client's reference grammar, the S3 client, Prometheus, JSON Schema, the
// CLI) would otherwise leave about a megabyte of regular expressions and
// tables in each of these processes' heap, for its whole life.
// TestChildRolesSkipTheDaemonsLibraries checks the order.
//
// cmd/berth imports it first, for its side effect.
package childentry

import (
	"os"
	"strings"

	"github.com/berth-sh/berth/cmd/berth/internal/roles"
	"github.com/berth-sh/berth/gateway/relay"
	"github.com/berth-sh/berth/internal/mcprelay"
	"github.com/berth-sh/berth/shim/shimcmd"
)

// ShimRole is the hidden command a daemon without the small shim runs
// its host and bwrap sessions' shims with.
const ShimRole = roles.Shim

// RelayRole is the hidden command of the gateway and egress relay.
const RelayRole = roles.Relay

// MCPRole is the hidden command of the berth MCP server's relay.
const MCPRole = roles.MCP

func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case ShimRole:
		os.Exit(shimcmd.Main("berth "+ShimRole, os.Args[2:]))
	case RelayRole:
		if o, ok := relayOptions(os.Args[2:]); ok {
			o.Stderr = os.Stderr
			os.Exit(relay.Run(o))
		}
	case MCPRole:
		if len(os.Args) == 2 {
			os.Exit(mcprelay.Main())
		}
	}
}

// relayOptions parses agent-exec's arguments as the daemon writes them:
// its four flags (each "--flag value" or "--flag=value", the gateway's
// with their defaults), "--", the agent's program and arguments. ok is
// false for anything else, which the command tree then parses.
func relayOptions(args []string) (o relay.Options, ok bool) {
	o.Listen, o.Socket = relay.DefaultListen, relay.DefaultSocket
	flags := map[string]*string{"--gateway-listen": &o.Listen, "--gateway-socket": &o.Socket,
		"--egress-listen": &o.EgressListen, "--egress-socket": &o.EgressSocket}
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			o.Argv = args[1:]
			return o, len(o.Argv) > 0
		}
		name, value, inline := strings.Cut(a, "=")
		dst, known := flags[name]
		switch {
		case !known:
			return o, false
		case inline:
			*dst, args = value, args[1:]
		case len(args) < 2:
			return o, false
		default:
			*dst, args = args[1], args[2:]
		}
	}
	return o, false
}
