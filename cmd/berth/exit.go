package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	"github.com/spf13/cobra"
)

// Exit codes (docs/api.md, "Errors").
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitNotFound = 3
	exitConflict = 4
)

// usageError is a mistake in how the command was called: a bad flag, a
// wrong number of arguments, an unknown command. It exits 2.
type usageError struct {
	err error
	// command is the path of the command that was misused ("berth logs").
	command string
}

// Error implements error.
func (e *usageError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError for cmd with a formatted message.
func usagef(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...), command: cmd.CommandPath()}
}

// exitError carries an exit code of its own: berth exec exits with its
// command's.
type exitError struct {
	code int
	err  error
}

// Error implements error.
func (e *exitError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *exitError) Unwrap() error { return e.err }

// exitCode maps an error to the process's exit code: 0 for nil, 2 for a
// usage error, 3 for not_found, 4 for conflict, 1 for anything else.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsageError(err) {
		return exitUsage
	}
	var be *berth.Error
	if errors.As(err, &be) {
		switch be.Code {
		case berth.ENotFound:
			return exitNotFound
		case berth.EConflict:
			return exitConflict
		}
	}
	return exitFailure
}

// isCobraUsageError recognises the usage errors cobra reports without a
// hook to wrap them (unknown commands, required flags, flag groups).
func isCobraUsageError(err error) bool {
	var be *berth.Error
	if errors.As(err, &be) {
		return false
	}
	msg := err.Error()
	for _, prefix := range []string{"unknown command ", "required flag(s) ", "if any flags in the group ", "at least one of the flags in the group "} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// errorText is what `berth: …` prints for err: the user-safe message of a
// *berth.Error, plain text for anything else.
func errorText(err error) string {
	var (
		be *berth.Error
		ua *bclient.Unauthorized
	)
	switch {
	case errors.As(err, &ua):
		// The daemon's words are the API's (an Authorization header).
		return tokenText(ua)
	case errors.As(err, &be):
		// The daemon's messages quote agents (a refused authenticate, a
		// form's choices, a failed start's stderr): escaped like all
		// agent text the CLI prints.
		return printable(be.Message)
	case errors.Is(err, context.Canceled):
		return "interrupted"
	}
	return printable(err.Error())
}

// errorCodeFailed is the code of a JSON error that has none of the API's
// (a turn that did not end well, an interrupt): it exits 1.
const errorCodeFailed = "failed"

// writeError prints err for the user on w: "berth: message" and, after
// a usage error, where the usage is; with -o json one object instead,
// {"error":{"code","message","details"?}} as the API answers one, whose
// code is the daemon's, invalid_argument for a usage error, else failed
// (docs/api.md, Errors). The exit code is the same either way.
func writeError(w io.Writer, err error, asJSON bool) {
	if !asJSON {
		fmt.Fprintf(w, "berth: %s\n", errorText(err))
		if hint := usageHint(err); hint != "" {
			fmt.Fprintln(w, hint)
		}
		return
	}
	type body struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details,omitempty"`
	}
	b := body{Code: errorCodeFailed, Message: errorText(err)}
	var be *berth.Error
	switch {
	case errors.As(err, &be):
		b.Code, b.Details = be.Code, be.Details
	case exitCode(err) == exitUsage:
		b.Code = berth.EInvalid
	}
	line, jerr := json.Marshal(map[string]body{"error": b})
	if jerr != nil {
		// Details that do not encode: the message still does.
		b.Details = nil
		line, _ = json.Marshal(map[string]body{"error": b})
	}
	fmt.Fprintf(w, "%s\n", line)
}

// jsonErrors reports whether root's command was run with -o json: by the
// parsed flag, or by the arguments when the parse stopped before -o.
func jsonErrors(root *cobra.Command, args []string) bool {
	// A command may set it itself (berth usage --json).
	if f := root.PersistentFlags().Lookup("output"); f != nil && (f.Changed || f.Value.String() == outputJSON) {
		return f.Value.String() == outputJSON
	}
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-ojson", a == "-o=json", a == "--output=json":
			return true
		case (a == "-o" || a == "--output") && i+1 < len(args):
			return args[i+1] == outputJSON
		}
	}
	return false
}

// tokenText says, in the CLI's words, which token a daemon that answered
// 401 wants (docs/api.md, Sign-in and browser safety).
func tokenText(ua *bclient.Unauthorized) string {
	const where = "the daemon keeps it in the token file of its home, $BERTH_HOME/token on its machine"
	if ua.TokenSent {
		return "the daemon refused the token (from --token, BERTH_TOKEN, or this home's): give its own with --token or BERTH_TOKEN; " + where
	}
	return "the daemon wants a token: give it with --token or BERTH_TOKEN; " + where
}

// usageHint returns the line printed after a usage error's message.
func usageHint(err error) string {
	var ue *usageError
	if errors.As(err, &ue) && ue.command != "" {
		return fmt.Sprintf("Run '%s --help' for usage.", ue.command)
	}
	// A command's own exit code (berth exec) is no usage error of ours.
	var ee *exitError
	if exitCode(err) == exitUsage && !errors.As(err, &ee) {
		return "Run 'berth --help' for usage."
	}
	return ""
}

// markUsageErrors makes the argument validators of cmd and its descendants
// return usage errors, so that a wrong number of arguments exits 2.
func markUsageErrors(cmd *cobra.Command) {
	if validate := cmd.Args; validate != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := validate(c, args); err != nil {
				var ue *usageError
				if errors.As(err, &ue) {
					return err
				}
				return &usageError{err: err, command: c.CommandPath()}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markUsageErrors(sub)
	}
}
