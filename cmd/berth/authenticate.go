package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
)

// authAnswer is what berth authenticate reads of the Session the daemon
// answers: its badge and, when the model gateway lacks a credential the
// agent's calls need, that credential's name (docs/api.md, Authentication).
type authAnswer struct {
	ID    string      `json:"id"`
	State berth.State `json:"state"`
	Badge berth.Badge `json:"badge"`
	Auth  *struct {
		Missing string `json:"missing"`
	} `json:"auth"`
}

// newAuthenticateCommand returns `berth authenticate ID METHOD`.
func newAuthenticateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "authenticate ID METHOD",
		Short: "Authenticate a session's agent with one of its auth methods (berth show lists them)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var raw json.RawMessage
			body := map[string]string{"method_id": args[1]}
			if err := c.Do(cmd.Context(), http.MethodPost, sessionPath(args[0], "/authenticate"), nil, body, &raw); err != nil {
				return err
			}
			var a authAnswer
			if err := json.Unmarshal(raw, &a); err != nil {
				return fmt.Errorf("the daemon's answer does not decode: %w", err)
			}
			if asJSON {
				if err := printRaw(cmd.OutOrStdout(), raw); err != nil {
					return err
				}
			}
			if err := stillNeedsAuth(&a, args[1]); err != nil {
				return err
			}
			if !asJSON {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "authenticated %s (%s, %s)\n", a.ID, a.State, a.Badge)
			}
			return err
		},
	}
}

// stillNeedsAuth is the error of an authenticate after which the session
// still shows needs_auth: it is never called authenticated then. It says
// what is missing: a credential of the model gateway (and how to set it),
// the agent's own login, or a turn that ends well.
func stillNeedsAuth(a *authAnswer, method string) error {
	if a.Badge != berth.BadgeNeedsAuth {
		return nil
	}
	// What berth prints of an error is escaped (errorText).
	id := a.ID
	switch {
	case a.Auth != nil && a.Auth.Missing != "":
		name := a.Auth.Missing
		return berth.Errorf(berth.EUnauthenticated,
			"session %s still needs authentication: the model gateway has no credential %s (set it with: berth credentials set %s; the next call uses it)",
			id, name, name)
	case a.State == berth.StateStarting:
		return berth.Errorf(berth.EUnauthenticated,
			"session %s still needs authentication: the agent took %s but still answers auth_required (berth show %s lists its methods)",
			id, method, id)
	}
	return berth.Errorf(berth.EUnauthenticated,
		"session %s still shows needs_auth: the agent took %s; the badge clears when a turn ends well (berth prompt %s …)",
		id, method, id)
}
