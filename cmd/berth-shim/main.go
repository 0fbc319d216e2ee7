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
	"context"
	"fmt"
	"os"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim/shimcmd"
)

func main() {
	raw, ok := shimcmd.OptionsArg(os.Args[1:])
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: berth-shim --options JSON (the job on stdin)")
		os.Exit(2)
	}
	opts, err := shimcmd.ParseOptions(raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-shim:", berth.ErrorMessage(err))
		os.Exit(2)
	}
	if err := shimcmd.Run(context.Background(), opts, os.Stdin, os.Stdout, shimcmd.Local); err != nil {
		fmt.Fprintln(os.Stderr, "berth-shim:", berth.ErrorMessage(err))
		os.Exit(1)
	}
}
