package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	bclient "github.com/berth-sh/berth/client"
)

// Output formats of -o/--output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// jsonOutput reports whether -o json was asked; any format other than table
// and json is a usage error.
func jsonOutput(cmd *cobra.Command) (bool, error) {
	format := ""
	if f := cmd.Flag("output"); f != nil {
		format = f.Value.String()
	}
	switch format {
	case "", outputTable:
		return false, nil
	case outputJSON:
		return true, nil
	default:
		return false, usagef(cmd, "unknown output format %q: want table or json", format)
	}
}

// dialFor checks -o and dials the daemon: what every client command starts
// with.
func dialFor(cmd *cobra.Command) (asJSON bool, c *bclient.Client, err error) {
	if asJSON, err = jsonOutput(cmd); err != nil {
		return false, nil, err
	}
	c, err = dial(cmd)
	return asJSON, c, err
}

// printRaw prints one JSON value from the API on one line, unchanged but
// for whitespace.
func printRaw(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return fmt.Errorf("the daemon's answer is not valid JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// newTable returns a tab-aligned writer for columns; Flush prints it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// callAPI sends one request and prints the answer: verbatim with -o json,
// else decoded into T and shown by table.
func callAPI[T any](cmd *cobra.Command, method, path string, query url.Values, in any, table func(io.Writer, *T) error) error {
	asJSON, c, err := dialFor(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	var raw json.RawMessage
	if err := c.Do(cmd.Context(), method, path, query, in, &raw); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if asJSON {
		if len(raw) == 0 {
			return nil
		}
		return printRaw(out, raw)
	}
	var v T
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("the daemon's answer does not decode: %w", err)
		}
	}
	return table(out, &v)
}

// sessionCommand returns `berth USE`, whose one argument is a session's
// id: one request, method to the session's path with suffix appended,
// whose answer show prints (-o json: verbatim).
func sessionCommand[T any](use, short, method, suffix string, show func(w io.Writer, id string, v *T) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAPI(cmd, method, sessionPath(args[0], suffix), nil, nil, func(w io.Writer, v *T) error {
				return show(w, args[0], v)
			})
		},
	}
}

// sessionPath is the API path of a session, with suffix appended.
func sessionPath(id, suffix string) string {
	return "/v1/sessions/" + url.PathEscape(id) + suffix
}

// ago renders how long ago t was, in the largest whole unit ("3m ago"),
// or how long until it is ("in 3m").
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < -time.Second:
		// A time to come (an expiry).
		return "in " + span((-d).Round(time.Second))
	case d < 0:
		return "now"
	}
	return span(d) + " ago"
}

// span renders a duration in its largest whole unit ("3m").
func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// labelsText renders labels as "k=v,k2=v2" in key order.
func labelsText(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return strings.Join(parts, ",")
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
