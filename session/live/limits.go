package live

import (
	"time"
)

// Limits bound what sessions may do.
type Limits struct {
	MaxPromptBytes   int
	MaxSessions      int
	HandshakeTimeout time.Duration
	StopGrace        time.Duration
	CancelGrace      time.Duration
	// MaxQueue caps the pending prompts of one session (default 10).
	MaxQueue int
	// PermissionTimeout rejects a permission request nobody decided (default 5m).
	PermissionTimeout time.Duration
	// StallAfter marks a turn hung after this long without a message from
	// the agent (default 2m); StallTimeout, when set, stops it.
	StallAfter   time.Duration
	StallTimeout time.Duration
	// IdleTimeout stops a session idle this long unless the session sets
	// its own (0: never).
	IdleTimeout time.Duration
	// SuperviseEvery is the supervisor's period (default 1s).
	SuperviseEvery time.Duration
	MaxLineBytes   int
	// MaxTurnOutput caps the agent's output recorded per turn, and between
	// two turns (see outputWindow); 0 records everything.
	MaxTurnOutput int64
	// MaxChildren caps the live children of one session, MaxDepth how deep
	// a tree grows (0: the defaults 5 and 1; negative: none).
	MaxChildren int
	MaxDepth    int
}
