package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain", errors.New("boom"), 1},
		{"usage", &usageError{err: errors.New("bad flag")}, 2},
		{"wrapped usage", fmt.Errorf("x: %w", &usageError{err: errors.New("bad")}), 2},
		{"cobra unknown command", errors.New(`unknown command "nope" for "berth"`), 2},
		{"cobra required flag", errors.New(`required flag(s) "x" not set`), 2},
		{"cobra flag group", errors.New(`if any flags in the group [a b] are set none of the others can be; [a b] were all set`), 2},
		{"not found", berth.Errorf(berth.ENotFound, "no session"), 3},
		{"wrapped not found", fmt.Errorf("show: %w", berth.Errorf(berth.ENotFound, "no session")), 3},
		{"conflict", berth.Errorf(berth.EConflict, "idle"), 4},
		{"invalid from the daemon", berth.Errorf(berth.EInvalid, "unknown agent"), 1},
		{"unavailable", berth.Errorf(berth.EUnavailable, "no daemon"), 1},
		{"unauthenticated", berth.Errorf(berth.EUnauthenticated, "token"), 1},
		{"internal", berth.Errorf(berth.EInternal, "x"), 1},
		{"coded message that looks like cobra's", berth.Errorf(berth.EInternal, "unknown command x"), 1},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	err := berth.WrapError(berth.ENotFound, errors.New("sql: no rows"), "session ses_x not found")
	if got := errorText(err); got != "session ses_x not found" {
		t.Errorf("errorText = %q", got)
	}
	if got := errorText(errors.New("plain")); got != "plain" {
		t.Errorf("errorText = %q", got)
	}
}

// runCLI runs the berth command line with args and returns its output and
// error.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestUsageErrorsExit2(t *testing.T) {
	isolateEnv(t)
	for _, args := range [][]string{
		{"show"},
		{"show", "a", "b"},
		{"ls", "--bogus"},
		{"ls", "extra"},
		{"nope"},
		{"ls", "-o", "yaml", "--addr", "127.0.0.1:1"},
		{"ls", "--label", "novalue", "--addr", "127.0.0.1:1"},
		{"prompt", "ses_1", "hi", "--queue", "--steer", "--addr", "127.0.0.1:1"},
		{"logs", "ses_1", "--after", "x"},
		{"logs", "ses_1", "--after", "-1", "--addr", "127.0.0.1:1"},
		{"agents", "--addr", "ftp://x"},
	} {
		_, err := runCLI(t, args...)
		if exitCode(err) != 2 {
			t.Errorf("berth %s: %v (exit %d), want exit 2", strings.Join(args, " "), err, exitCode(err))
		}
		if err != nil && usageHint(err) == "" {
			t.Errorf("berth %s: no usage hint", strings.Join(args, " "))
		}
	}
}

// A command that exits 2 inside a session (berth exec passes its code on)
// is not a usage error of berth's: no usage hint follows it.
func TestExecExitTwoHasNoUsageHint(t *testing.T) {
	err := &exitError{code: 2, err: errors.New("command exited 2")}
	if exitCode(err) != 2 {
		t.Fatalf("exit code %d", exitCode(err))
	}
	if h := usageHint(err); h != "" {
		t.Errorf("usage hint %q after a command's own exit 2", h)
	}
}

// An error the daemon answers with quotes an agent (here its refusal of
// authenticate, with terminal escapes that would retitle the window and
// clear the screen): what `berth: …` prints escapes them.
func TestErrorTextEscapesAnAgentsWords(t *testing.T) {
	isolateEnv(t)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"code":"invalid_argument","message":"the agent refused authentication: \u001b]0;owned\u0007\u001b[2Jbye"}}`)
	}))
	t.Cleanup(ts.Close)
	_, err := runCLI(t, "authenticate", "ses_a", "login", "--addr", ts.URL)
	got := errorText(err)
	if err == nil || strings.ContainsAny(got, "\x1b\x07") || !strings.Contains(got, `\x1b]0;owned\x07\x1b[2Jbye`) {
		t.Fatalf("printed %q (%v)", got, err)
	}
}

// With -o json an error is one JSON object on stderr, as the API answers
// one: the daemon's code and details, invalid_argument for a usage error,
// failed for the rest; without, the "berth: …" line and the usage hint.
func TestWriteErrorAsJSON(t *testing.T) {
	notFound := &berth.Error{Code: berth.ENotFound, Message: "no session ses_x", Details: map[string]any{"id": "ses_x"}}
	usage := &usageError{err: errors.New("unknown flag: --nope"), command: "berth ls"}
	for _, c := range []struct {
		err  error
		want string
	}{
		{notFound, `{"error":{"code":"not_found","message":"no session ses_x","details":{"id":"ses_x"}}}`},
		{fmt.Errorf("create: %w", notFound), `{"error":{"code":"not_found","message":"no session ses_x","details":{"id":"ses_x"}}}`},
		{usage, `{"error":{"code":"invalid_argument","message":"unknown flag: --nope"}}`},
		{errors.New("the turn ended with error"), `{"error":{"code":"failed","message":"the turn ended with error"}}`},
	} {
		var b bytes.Buffer
		writeError(&b, c.err, true)
		if b.String() != c.want+"\n" {
			t.Errorf("%v: %q, want %q", c.err, b.String(), c.want)
		}
	}
	var b bytes.Buffer
	writeError(&b, usage, false)
	if b.String() != "berth: unknown flag: --nope\nRun 'berth ls --help' for usage.\n" {
		t.Errorf("as text: %q", b.String())
	}
}

// jsonErrors follows -o as parsed, else as given when the parse stopped
// before it.
func TestJSONErrorsFollowsOutput(t *testing.T) {
	for args, want := range map[string]bool{
		"-o json ls":            true,
		"ls --output=json":      true,
		"ls -ojson":             true,
		"ls -o table":           false,
		"ls":                    false,
		"exec ID -- x -o json":  false,
		"ls --nope -o json":     true,
		"ls -o json --bad-flag": true,
	} {
		root := newRootCommand()
		fields := strings.Fields(args)
		if cmd, rest, err := root.Find(fields); err == nil {
			_ = cmd.ParseFlags(rest)
		}
		if got := jsonErrors(root, fields); got != want {
			t.Errorf("%q: %v, want %v", args, got, want)
		}
	}
	// berth usage --json sets -o itself, as a value, not as a parsed flag.
	root := newRootCommand()
	if err := root.PersistentFlags().Lookup("output").Value.Set(outputJSON); err != nil || !jsonErrors(root, []string{"usage", "--json"}) {
		t.Errorf("usage --json: errors are not JSON (%v)", err)
	}
}
