package live

import (
	"time"

	"github.com/berth-sh/berth"
)

// Observer is told what the manager does, for metrics. Its methods are
// called on the session's own goroutines, some under the session's lock:
// they must return at once and never call back into the manager.
type Observer interface {
	// SessionCreated: a create reached its agent's handshake (ok) or
	// stopped before (startup failed), in took, under sandbox.
	SessionCreated(sandbox string, ok bool, took time.Duration)
	// TurnEnded: a turn ended with stopReason after took (negative when
	// a previous daemon started it: its length is not known).
	TurnEnded(stopReason string, took time.Duration)
	// PermissionDecided: a permission request was decided (by the user,
	// the policy, the timeout or a cancel) waited after it was asked.
	PermissionDecided(decidedBy string, waited time.Duration)
	// AgentExited: a session's agent is gone for reason (with the
	// failure's kind, "" when none).
	AgentExited(reason berth.StopReason, failureKind string)
}
