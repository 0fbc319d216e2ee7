package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/sandbox/docker"
	"github.com/berth-sh/berth/shim/shimcmd"
)

// providerOptions are what it takes to make the sandbox providers the
// daemon has, passed to its shims so theirs are the same.
type providerOptions struct{ shimcmd.Options }

// newProviderOptions collects the provider options of a daemon.
func newProviderOptions(cfg *config.Config, self, home string) providerOptions {
	return providerOptions{shimcmd.Options{UID: cfg.Sandbox.UID, HostUID: cfg.Sandbox.HostUID, DockerHost: cfg.Sandbox.Docker.Host,
		DockerImage: cfg.Sandbox.Docker.Image, Berth: self, Limits: cfg.Sandbox.Limits(), Instance: nodeID(home)}}
}

// anyProvider makes the provider called name, docker included (the small
// berth-shim makes host and bwrap only). close releases it.
func anyProvider(o shimcmd.Options, name string) (p berth.SandboxProvider, close func(), err error) {
	if name != berth.SandboxDocker {
		return shimcmd.Local(o, name)
	}
	dk, err := providerOptions{o}.docker()
	if err != nil {
		return nil, nil, err
	}
	return dk, func() { _ = dk.Close() }, nil
}

// docker makes the docker provider.
func (o providerOptions) docker() (*docker.Provider, error) {
	return docker.New(docker.Options{Host: o.DockerHost, Image: o.DockerImage, Berth: o.Berth, UID: o.UID,
		Limits: o.Limits, Instance: o.Instance})
}

// newShimCmd is the hidden command a daemon runs once per session to hold
// its agent (see package shim) when it has no small berth-shim to run, or
// for the docker provider. The job comes on stdin.
func newShimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "shim --options JSON",
		Short:  "Hold one session's agent for the daemon (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, _ := cmd.Flags().GetString("options")
			opts, err := shimcmd.ParseOptions(raw)
			if err != nil {
				return usagef(cmd, "%s", berth.ErrorMessage(err))
			}
			return shimcmd.Run(cmd.Context(), opts, os.Stdin, os.Stdout, anyProvider)
		},
	}
	cmd.Flags().String("options", "{}", "the daemon's sandbox provider options, as JSON")
	return cmd
}
