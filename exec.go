package berth

import "strings"

// Exec bounds.
const (
	// DefaultExecTimeout is the timeout of an exec that names none, in seconds.
	DefaultExecTimeout = 60
	// MaxExecTimeout is the longest timeout an exec may ask for, in seconds.
	MaxExecTimeout = 3600
	// MaxExecOutput caps the stdout and the stderr an exec answers with.
	MaxExecOutput = 1 << 20
)

// ExecRequest is the body of POST /v1/sessions/{id}/exec: a command run in
// the session's sandbox, in its workspace.
type ExecRequest struct {
	// Command is the program and its arguments; no shell is involved.
	Command []string `json:"command"`
	// Cwd is a directory relative to (or inside) the workspace.
	Cwd string `json:"cwd,omitempty"`
	// Env is added to the sandbox's environment.
	Env map[string]string `json:"env,omitempty"`
	// TimeoutSeconds kills the command's process group at the deadline
	// (default DefaultExecTimeout, at most MaxExecTimeout).
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

// Validate checks an exec request and fills its default timeout.
func (r *ExecRequest) Validate() error {
	if len(r.Command) == 0 || strings.TrimSpace(r.Command[0]) == "" {
		return &Error{Code: EInvalid, Message: "command must name a program", Details: map[string]any{"field": "command"}}
	}
	switch {
	case r.TimeoutSeconds < 0 || r.TimeoutSeconds > MaxExecTimeout:
		return &Error{Code: EInvalid, Message: "timeout_seconds must be between 1 and 3600",
			Details: map[string]any{"field": "timeout_seconds"}}
	case r.TimeoutSeconds == 0:
		r.TimeoutSeconds = DefaultExecTimeout
	}
	for k := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return &Error{Code: EInvalid, Message: "env name " + k + " is not valid", Details: map[string]any{"field": "env"}}
		}
	}
	return nil
}

// ExecResult is the answer of an exec.
type ExecResult struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// StdoutTruncated and StderrTruncated say output past MaxExecOutput
	// was dropped (the end is kept, as for terminals).
	StdoutTruncated bool  `json:"stdout_truncated,omitempty"`
	StderrTruncated bool  `json:"stderr_truncated,omitempty"`
	TimedOut        bool  `json:"timed_out"`
	DurationMS      int64 `json:"duration_ms"`
}
