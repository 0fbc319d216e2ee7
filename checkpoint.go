package berth

import (
	"context"
	"time"
)

// Checkpoint is a recorded workspace state, taken before a turn
// (docs/api.md, "Checkpoints, rewind and fork").
type Checkpoint struct {
	ID        string    `json:"id"`
	TurnID    string    `json:"turn_id"`
	CreatedAt time.Time `json:"created_at"`
	// Files counts the regular files recorded; Bytes is their size.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Skipped lists (the first 100 of) the paths left out and why;
	// SkippedTotal counts them all.
	Skipped      []CheckpointSkip `json:"skipped"`
	SkippedTotal int              `json:"skipped_total"`
}

// CheckpointSkip is a path a checkpoint left out: reason is gitignored,
// vcs, too_large, total_limit, too_deep, special, symlink_outside, hidden,
// unreadable or changed.
type CheckpointSkip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ForkRef says which session and checkpoint a session was forked from.
type ForkRef struct {
	SessionID    string `json:"session_id"`
	CheckpointID string `json:"checkpoint_id"`
}

// RewindRequest is the body of POST /v1/sessions/{id}/rewind.
type RewindRequest struct {
	CheckpointID string `json:"checkpoint_id"`
}

// ForkRequest is the body of POST /v1/sessions/{id}/fork.
type ForkRequest struct {
	CheckpointID string `json:"checkpoint_id"`
	Agent        string `json:"agent,omitempty"`
	Name         string `json:"name,omitempty"`
}

// CheckpointService is the checkpoint part of SessionService.
type CheckpointService interface {
	// ListCheckpoints returns the session's checkpoints, oldest first.
	// ENotFound.
	ListCheckpoints(ctx context.Context, id string) ([]*Checkpoint, error)
	// Rewind restores an idle session's workspace to a checkpoint and
	// returns the session. EConflict unless the session is active and
	// idle, ENotFound for an unknown checkpoint, EUnavailable when
	// checkpoints are off.
	Rewind(ctx context.Context, id string, req RewindRequest) (*Session, error)
	// Fork creates a session whose workspace is a copy of the checkpoint
	// and whose conversation is the parent's up to the checkpoint's turn.
	// ENotFound, EInvalid for an unknown agent.
	Fork(ctx context.Context, id string, req ForkRequest) (*Session, error)
}
