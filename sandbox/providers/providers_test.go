package providers

import (
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim/shimcmd"
)

// Every provider berth has is made by its name, and no other name makes one.
func TestMakeByName(t *testing.T) {
	for _, name := range berth.SandboxProviders {
		p, closeP, err := Make(shimcmd.Options{}, name)
		if err != nil || p.Name() != name {
			t.Fatalf("Make(%q) = %v, %v", name, p, err)
		}
		closeP()
	}
	if _, _, err := Make(shimcmd.Options{}, "chroot"); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("an unknown provider: %v", err)
	}
}

// What a default relies on: bwrap when it is the default or auto must
// isolate; docker only as the default.
func TestRelianceOf(t *testing.T) {
	for _, c := range []struct {
		def     string
		require bool
		want    Reliance
	}{
		{"auto", false, Reliance{BwrapUsed: true, HostFallback: true}},
		{"", true, Reliance{BwrapNeeded: true, BwrapUsed: true}},
		{"bwrap", false, Reliance{BwrapNeeded: true, BwrapUsed: true}},
		{"host", false, Reliance{HostFallback: true}},
		{"docker", false, Reliance{DockerNeeded: true}},
	} {
		if got := RelianceOf(c.def, c.require); got != c.want {
			t.Errorf("RelianceOf(%q, %v) = %+v, want %+v", c.def, c.require, got, c.want)
		}
	}
}
