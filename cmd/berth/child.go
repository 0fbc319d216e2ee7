package main

import (
	"context"
	"fmt"
	"io"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp/demoagent"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/shim/shimcmd"
)

// runChildRole runs the hidden programs a daemon starts once per session —
// `berth shim` (when it has no small shim, or for docker) and `berth
// agent-demo` — without building the command tree first: some forty
// commands and their flags, made for nothing, in every shim and demo
// agent's start and memory. ok is false for any other command, which main
// hands to the tree (with the same hidden commands in it, for --help and
// for arguments the fast path does not take).
func runChildRole(args []string, stdin io.Reader, stdout io.WriteCloser, stderr io.Writer) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "shim":
		raw, ok := shimcmd.OptionsArg(args[1:])
		if !ok {
			return 0, false
		}
		opts, err := shimcmd.ParseOptions(raw)
		if err != nil {
			fmt.Fprintf(stderr, "berth: %s\n", berth.ErrorMessage(err))
			return exitUsage, true
		}
		if err := shimcmd.Run(context.Background(), opts, stdin, stdout, daemon.AnyProvider); err != nil {
			fmt.Fprintf(stderr, "berth: %s\n", errorText(err))
			return exitCode(err), true
		}
		return 0, true
	case "agent-demo":
		return demoagent.Main(args[1:], stdin, stdout, stderr), true
	}
	return 0, false
}
