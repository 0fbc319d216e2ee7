package shimcmd

import (
	"testing"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// The one flag is read as the daemon passes it, and nothing else is taken.
func TestOptionsArg(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		ok   bool
	}{
		{[]string{"--options", `{"uid":1}`}, `{"uid":1}`, true},
		{[]string{`--options={"uid":1}`}, `{"uid":1}`, true},
		{nil, "", false},
		{[]string{"--options"}, "", false},
		{[]string{"--options", "{}", "extra"}, "", false},
		{[]string{"-x", "{}"}, "", false},
		{[]string{"--options="}, "", false},
	} {
		got, ok := OptionsArg(c.args)
		if got != c.want || ok != c.ok {
			t.Errorf("OptionsArg(%q) = %q, %v; want %q, %v", c.args, got, ok, c.want, c.ok)
		}
	}
}

// A spare makes ahead what a bwrap sandbox of the daemon's options needs
// when its launcher expects a bwrap job, or says nothing, and nothing
// when it expects another.
func TestWarmFor(t *testing.T) {
	opts := Options{HostUID: 99999, EtcView: "/home/etc", Limits: core.SandboxLimits{Pids: 64, MemoryBytes: 1 << 30}}
	all := bwrap.Warm{Pids: true, Memory: true, Stage: true, EtcView: "/home/etc"}
	for expect, want := range map[string]bwrap.Warm{"": all, core.SandboxBwrap: all, core.SandboxHost: {}, core.SandboxDocker: {}} {
		if got := warmFor(opts, expect); got != want {
			t.Errorf("expecting %q: %+v, want %+v", expect, got, want)
		}
	}
	if got := warmFor(Options{}, ""); got != (bwrap.Warm{}) {
		t.Errorf("a non-root daemon without limits nor view: %+v, want nothing", got)
	}
}
