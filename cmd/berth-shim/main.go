// Command berth-shim is the small shim program a berth daemon runs, one per
// session, to hold an agent in the host or bwrap sandbox (see package
// shim). It links only what a shim needs, so that a thousand of them cost
// a fraction of a thousand copies of berth; the berth binary carries it
// and writes it to $BERTH_HOME/bin at start (see cmd/berth/shimbin.go).
// It speaks exactly what `berth shim` speaks (package shim/shimcmd).
//
// Usage: berth-shim --options JSON, the job on stdin.
package main

import (
	"os"

	"github.com/berth-sh/berth/shim/shimcmd"
)

func main() { os.Exit(shimcmd.Main("berth-shim", os.Args[1:])) }
