package bench

import (
	"strings"
	"testing"
)

// The soak's judge names every figure that grew past its slack, and only
// those.
func TestSoakGrowthNamesWhatGrew(t *testing.T) {
	before := soakUsage{FDs: 20, Goroutines: 30, Processes: 1, DiskBytes: 1000}
	slack := soakUsage{FDs: 8, Goroutines: 16, Processes: 1, DiskBytes: 100}
	if g := soakGrowth(before, soakUsage{FDs: 28, Goroutines: 46, Processes: 2, DiskBytes: 1100}, slack); len(g) != 0 {
		t.Errorf("growth within slack reported: %v", g)
	}
	g := soakGrowth(before, soakUsage{FDs: 29, Goroutines: 30, Processes: 3, DiskBytes: 5000}, slack)
	got := strings.Join(g, "; ")
	for _, want := range []string{"open fds 20 → 29", "processes 1 → 3", "disk bytes outside the store 1000 → 5000"} {
		if !strings.Contains(got, want) {
			t.Errorf("growth %q does not name %q", got, want)
		}
	}
	if strings.Contains(got, "goroutines") {
		t.Errorf("goroutines did not grow but are named: %q", got)
	}
}
