// Package providers makes every sandbox provider berth has by name, and
// says which of them a config's default relies on: the one place outside
// the providers themselves that knows their names.
package providers

import (
	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/docker"
	"github.com/berth-sh/berth/sandbox/local"
	"github.com/berth-sh/berth/shim/shimcmd"
)

// Make makes the provider called name, docker included; close releases it.
func Make(o shimcmd.Options, name string) (p berth.SandboxProvider, close func(), err error) {
	if p := local.Make(o.Local(), name); p != nil {
		return p, func() {}, nil
	}
	if name != berth.SandboxDocker {
		return nil, nil, berth.Errorf(berth.EInvalid, "no sandbox provider is called %q", name)
	}
	dk, err := Docker(o)
	if err != nil {
		return nil, nil, err
	}
	return dk, func() { _ = dk.Close() }, nil
}

// All makes every provider: the local ones, then docker for the
// configured engine. The caller closes the docker provider.
func All(o shimcmd.Options) ([]berth.SandboxProvider, *docker.Provider, error) {
	dk, err := Docker(o)
	if err != nil {
		return nil, nil, err
	}
	return append(local.All(o.Local()), dk), dk, nil
}

// Docker makes the docker provider of o.
func Docker(o shimcmd.Options) (*docker.Provider, error) {
	return docker.New(docker.Options{Host: o.DockerHost, Image: o.DockerImage, Berth: o.Berth, UID: o.UID, HostUID: o.HostUID,
		Limits: o.Limits, Instance: o.Instance})
}

// Reliance is what a config relies on of the providers: whether bwrap is
// needed (sessions cannot run without it) or used (sessions run in it
// when it works), whether sessions fall back to the host sandbox without
// it, and whether docker is the default.
type Reliance struct {
	BwrapNeeded, BwrapUsed, HostFallback, DockerNeeded bool
}

// RelianceOf is what a config whose [sandbox] default is def relies on;
// with requireIsolation "auto" cannot fall back to host.
func RelianceOf(def string, requireIsolation bool) Reliance {
	auto := def == berth.SandboxAuto || def == ""
	needed := def == berth.SandboxBwrap || auto && requireIsolation
	return Reliance{
		BwrapNeeded:  needed,
		BwrapUsed:    auto || def == berth.SandboxBwrap,
		HostFallback: !needed && def != berth.SandboxDocker,
		DockerNeeded: def == berth.SandboxDocker,
	}
}
