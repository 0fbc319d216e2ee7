// Package local makes, by name, the sandbox providers that run on the
// host without a service: host and bwrap. The small shim carries only
// these (it links no Docker client).
package local

import (
	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/sandbox/bwrap"
	"github.com/berth-sh/berth/sandbox/host"
)

// Names are the local providers' names.
var Names = []string{core.SandboxHost, core.SandboxBwrap}

// Options say how the local providers are made: bwrap's sandboxes run as
// UID inside, HostUID on the host, and see /etc through EtcView (see
// bwrap.Options).
type Options struct {
	UID, HostUID int
	EtcView      string
}

// Make makes the local provider called name; nil when none is.
func Make(o Options, name string) core.SandboxProvider {
	switch name {
	case core.SandboxHost:
		return host.New()
	case core.SandboxBwrap:
		return bwrap.New(bwrap.Options{UID: o.UID, HostUID: o.HostUID, EtcView: o.EtcView})
	}
	return nil
}

// All makes every local provider.
func All(o Options) []core.SandboxProvider {
	out := make([]core.SandboxProvider, len(Names))
	for i, name := range Names {
		out[i] = Make(o, name)
	}
	return out
}
