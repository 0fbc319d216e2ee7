package session

import (
	"time"

	"github.com/berth-sh/berth"
)

// noObserver is the Observer of a manager given none.
type noObserver struct{}

func (noObserver) SessionCreated(string, bool, time.Duration) {}
func (noObserver) TurnEnded(string, time.Duration)            {}
func (noObserver) PermissionDecided(string, time.Duration)    {}
func (noObserver) AgentExited(berth.StopReason, string)       {}
