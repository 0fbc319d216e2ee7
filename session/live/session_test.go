package live

import (
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// An agent the kernel killed at the sandbox's memory limit is reported as
// such: a sandbox failure saying out of memory, not a bare SIGKILL.
func TestClassifyOOMExit(t *testing.T) {
	reason, f := classifyExit(berth.ExitStatus{Code: -1, Signal: "SIGKILL", OOMKills: 1}, []string{"last words"}, false)
	if reason != berth.StopAgentCrashed || f == nil || f.Kind != berth.FailSandbox || !strings.Contains(f.Message, "out of memory") || !strings.Contains(f.Message, "last words") {
		t.Errorf("OOM exit: %s, %+v", reason, f)
	}
	// A SIGKILL with no OOM kill is a plain crash.
	if _, f := classifyExit(berth.ExitStatus{Code: -1, Signal: "SIGKILL"}, nil, false); f == nil || f.Kind != berth.FailProcessExit {
		t.Errorf("plain SIGKILL: %+v", f)
	}
}
