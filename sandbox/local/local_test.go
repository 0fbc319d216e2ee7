package local

import (
	"testing"

	"github.com/berth-sh/berth"
)

// Every local name makes its provider, named so; another name makes none.
func TestMakeByName(t *testing.T) {
	for _, name := range Names {
		if p := Make(Options{}, name); p == nil || p.Name() != name {
			t.Errorf("Make(%q) = %v", name, p)
		}
	}
	if p := Make(Options{}, berth.SandboxDocker); p != nil {
		t.Errorf("docker is not local: %v", p)
	}
	if got := All(Options{}); len(got) != len(Names) {
		t.Errorf("All made %d providers", len(got))
	}
}
