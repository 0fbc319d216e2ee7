package main

import (
	"github.com/spf13/pflag"
)

// permissionModes are the values of --permissions (docs/api.md,
// Permissions), in the order the help and completion give them.
var permissionModes = []string{"approve-reads", "approve-all", "deny-all", "ask"}

// addPermissionsFlag registers --permissions on fl, writing to p, with
// --mode kept as a hidden, deprecated alias: --mode once named the
// permission mode here and names the agent's mode on `berth set`. cobra
// prints a one-line notice on stderr when the alias is used.
func addPermissionsFlag(fl *pflag.FlagSet, p *string, usage string) {
	fl.StringVar(p, "permissions", "", usage)
	fl.StringVar(p, "mode", "", usage)
	// MarkDeprecated also hides the flag; it fails only for a flag not there.
	_ = fl.MarkDeprecated("mode", "use --permissions (--mode is the agent's mode on berth set)")
}
