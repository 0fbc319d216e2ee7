package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/credkey"
)

// newCredentialsCommand returns `berth credentials`: the credentials the
// model gateway adds to the agents' calls (docs/api.md, Credentials). No
// subcommand ever prints a value.
func newCredentialsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "credentials",
		Aliases: []string{"creds"},
		Short:   "Set, list and remove the model credentials agents use through the gateway",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCredentialsSetCommand(), newCredentialsLsCommand(), newCredentialsRmCommand(), newCredentialsKeygenCommand())
	return cmd
}

// newCredentialsSetCommand returns `berth credentials set NAME`.
func newCredentialsSetCommand() *cobra.Command {
	var kind, fromEnv string
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Set a credential from stdin (asked without echo at a terminal) or --from-env VAR",
		Long: "Set the credential NAME (for example anthropic, openai, gemini: the credential a [[models]]\n" +
			"upstream names). The value is read from --from-env VAR, or else from stdin: at a terminal it\n" +
			"is asked for without echo; otherwise all of stdin is read, less one trailing newline.\n" +
			"Kind is api_key, or oauth_token for a subscription token (found from an sk-ant-oat… value).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			// Checked here too, so a bad name is refused before a value is asked for.
			if err := berth.ValidateCredentialName(name); err != nil {
				return usagef(cmd, "%s", berth.ErrorMessage(err))
			}
			value, err := credentialValue(cmd, name, fromEnv)
			if err != nil {
				return err
			}
			body := map[string]string{"value": string(value)}
			if kind != "" {
				body["kind"] = kind
			}
			return callAPI(cmd, http.MethodPut, credentialPath(name), nil, body, func(w io.Writer, c *berth.Credential) error {
				_, err := fmt.Fprintf(w, "credential %s set (%s)\n", c.Name, c.Kind)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "api_key or oauth_token (default: found from the value)")
	cmd.Flags().StringVar(&fromEnv, "from-env", "", "read the value from this environment variable instead of stdin")
	return cmd
}

// credentialValue reads the value of `berth credentials set`: from the
// environment variable fromEnv when set, else from stdin.
func credentialValue(cmd *cobra.Command, name, fromEnv string) ([]byte, error) {
	if fromEnv != "" {
		v, ok := os.LookupEnv(fromEnv)
		if !ok || v == "" {
			return nil, usagef(cmd, "--from-env %s: the variable is not set or empty", fromEnv)
		}
		return []byte(v), nil
	}
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && isTTY(f) {
		return readSecret(cmd.Context(), fmt.Sprintf("value of credential %s (not shown): ", name))
	}
	// One byte more than a value plus a CRLF tells a value that is too long.
	raw, err := io.ReadAll(io.LimitReader(in, berth.MaxCredentialBytes+3))
	if err != nil {
		return nil, fmt.Errorf("read the value from stdin: %w", err)
	}
	raw = trimNewline(raw)
	if len(raw) == 0 {
		return nil, usagef(cmd, "no value on stdin (pipe it in, or use --from-env VAR)")
	}
	return raw, nil
}

// trimNewline removes one trailing newline (LF or CRLF): what echo and
// most editors leave after a key.
func trimNewline(b []byte) []byte {
	if c, ok := bytes.CutSuffix(b, []byte("\n")); ok {
		return bytes.TrimSuffix(c, []byte("\r"))
	}
	return b
}

// credentialPath is the API path of a credential.
func credentialPath(name string) string { return "/v1/credentials/" + url.PathEscape(name) }

// newCredentialsLsCommand returns `berth credentials ls`.
func newCredentialsLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the credentials: name, kind, when set and when last used (never a value)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type credentialList struct {
				Credentials []berth.Credential `json:"credentials"`
			}
			return callAPI(cmd, http.MethodGet, "/v1/credentials", nil, nil, func(w io.Writer, l *credentialList) error {
				if len(l.Credentials) == 0 {
					_, err := fmt.Fprintln(w, "no credentials (berth credentials set NAME)")
					return err
				}
				t := newTable(w)
				fmt.Fprintln(t, "NAME\tKIND\tSET\tLAST USED")
				for _, c := range l.Credentials {
					used := "never"
					if c.LastUsedAt != nil {
						used = ago(*c.LastUsedAt)
					}
					fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", c.Name, c.Kind, ago(c.CreatedAt), used)
				}
				return t.Flush()
			})
		},
	}
}

// newCredentialsRmCommand returns `berth credentials rm NAME`.
func newCredentialsRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a credential",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAPI(cmd, http.MethodDelete, credentialPath(args[0]), nil, nil, func(w io.Writer, _ *struct{}) error {
				_, err := fmt.Fprintf(w, "removed credential %s\n", args[0])
				return err
			})
		},
	}
}

// newCredentialsKeygenCommand returns `berth credentials keygen PATH`: a
// key file for [credentials] key_file, made here, without a daemon.
func newCredentialsKeygenCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "keygen PATH",
		Short: "Write a new key for [credentials] key_file (PostgreSQL stores) to PATH, mode 0600",
		Long: "Write 32 random bytes to PATH, a new file of mode 0600, for [credentials] key_file: the key\n" +
			"that encrypts credentials in a PostgreSQL store. Every node of the store needs the same file.\n" +
			"An existing file is never replaced: the credentials sealed under it would be lost.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := credkey.Generate(args[0]); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "wrote a new key to %s; set [credentials] key_file = %q on every node\n", args[0], args[0])
			return err
		},
	}
}
