// Command berth is the berth daemon and its command-line client: `berth
// serve` runs the daemon; the other commands talk to a running one over its
// Unix socket or HTTP.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/cmd/berth/internal/roles"
	// First for its init: `berth shim-local` and `berth agent-exec` run from there, before the
	// packages only the daemon and the CLI use are initialised.
	_ "github.com/berth-sh/berth/cmd/berth/internal/childentry"
	// `berth --help` alone is answered from its init, before the same packages.
	_ "github.com/berth-sh/berth/cmd/berth/internal/helpentry"
	// For the CLI and the daemon, the heap their libraries initialise into is mapped at once (its
	// init runs before childentry's and most others: see package pretouch; serve waits for it).
	_ "github.com/berth-sh/berth/cmd/berth/internal/pretouch"
)

func main() {
	if code, ok := runChildRole(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills the process the usual way.
	context.AfterFunc(ctx, stop)
	var root *cobra.Command
	if roles.Daemon(os.Args) {
		// The daemon's start builds only its own command: the whole
		// tree's flags took it about a millisecond.
		root = newDaemonRootCommand()
	} else {
		root = newRootCommand()
	}
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		writeError(os.Stderr, err, jsonErrors(root, os.Args[1:]))
		os.Exit(exitCode(err))
	}
}

// newRoot is the root command: its flags, and none of its subcommands.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "berth",
		Short: "Run ACP coding agents as durable, sandboxed sessions",
		Long: "berth runs coding agents that speak the Agent Client Protocol as durable sessions,\n" +
			"owned by a daemon (berth serve) and driven over HTTP/SSE, a Unix socket and this CLI.\n\n" +
			"Exit codes: 0 ok, 1 failure, 2 usage error, 3 not found, 4 conflict.",
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("berth {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.String("addr", "", "daemon address, host:port or unix:PATH (env BERTH_ADDR; default: the socket in --home if present, else "+defaultAddr+")")
	pf.String("home", "", "berth home directory (env BERTH_HOME; default ~/.berth)")
	pf.String("token", "", "API bearer token (env BERTH_TOKEN)")
	pf.StringP("output", "o", outputTable, "output format: table or json")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{err: err, command: cmd.CommandPath()}
	})
	return root
}

// newDaemonRootCommand is the tree of `berth serve`: the root and the
// daemon's command alone, which behave as in the whole tree.
func newDaemonRootCommand() *cobra.Command {
	root := newRoot()
	root.AddCommand(newServeCmd())
	markUsageErrors(root)
	return root
}

// newRootCommand builds the whole command tree.
func newRootCommand() *cobra.Command {
	root := newRoot()
	addDaemonCommands(root)
	root.AddCommand(
		newAgentsCommand(),
		newCreateCommand(),
		newLsCommand(),
		newShowCommand(),
		newPromptCommand(),
		newLogsCommand(),
		newAttachCommand(),
		newCancelCommand(),
		newStopCommand(),
		newRmCommand(),
		newApproveCommand(),
		newResumeCommand(),
		newSetCommand(),
		newCommandsCommand(),
		newClearCommand(),
		newAuthenticateCommand(),
		newSpawnCommand(),
		newChildrenCommand(),
		newUsageCommand(),
		newQueueCommand(),
		newPermissionsCommand(),
		newElicitationsCommand(),
		newAnswerCommand(),
		newExecCommand(),
		newSnapshotCommand(),
		newRepairCommand(),
		newUICommand(),
		newDoctorCommand(),
		newHooksCommand(),
		newNodesCommand(),
		newCredentialsCommand(),
	)
	root.AddCommand(checkpointCommands()...)
	// Bad arguments anywhere in the tree exit 2.
	markUsageErrors(root)
	// Completions are looked up only by the shell's hidden request: the
	// walk that registers them is not paid by every other command.
	if len(os.Args) > 1 && (os.Args[1] == cobra.ShellCompRequestCmd || os.Args[1] == cobra.ShellCompNoDescRequestCmd) {
		addSessionCompletion(root)
		addFlagCompletion(root)
	}
	return root
}
