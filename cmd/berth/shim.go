package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/sandbox/bwrap"
	"github.com/berth-sh/berth/sandbox/docker"
	"github.com/berth-sh/berth/sandbox/host"
	"github.com/berth-sh/berth/shim"
)

// providerOptions are what it takes to make the sandbox providers the
// daemon has, passed to its shims so theirs are the same.
type providerOptions struct {
	UID         int                 `json:"uid"`
	HostUID     int                 `json:"host_uid"`
	DockerHost  string              `json:"docker_host,omitempty"`
	DockerImage string              `json:"docker_image,omitempty"`
	Berth       string              `json:"berth"`
	Limits      berth.SandboxLimits `json:"limits"`
	Instance    string              `json:"instance"`
}

// newProviderOptions collects the provider options of a daemon.
func newProviderOptions(cfg *config.Config, self, home string) providerOptions {
	return providerOptions{UID: cfg.Sandbox.UID, HostUID: cfg.Sandbox.HostUID, DockerHost: cfg.Sandbox.Docker.Host, DockerImage: cfg.Sandbox.Docker.Image,
		Berth: self, Limits: cfg.Sandbox.Limits(), Instance: nodeID(home)}
}

// provider makes the provider called name. close releases it.
func (o providerOptions) provider(name string) (p berth.SandboxProvider, close func(), err error) {
	switch name {
	case berth.SandboxHost:
		return host.New(), func() {}, nil
	case berth.SandboxBwrap:
		return o.bwrap(), func() {}, nil
	case berth.SandboxDocker:
		dk, err := o.docker()
		if err != nil {
			return nil, nil, err
		}
		return dk, func() { _ = dk.Close() }, nil
	}
	return nil, nil, berth.Errorf(berth.EInvalid, "unknown sandbox provider %q", name)
}

// bwrap makes the bwrap provider.
func (o providerOptions) bwrap() *bwrap.Provider {
	return bwrap.New(bwrap.Options{UID: o.UID, HostUID: o.HostUID})
}

// docker makes the docker provider.
func (o providerOptions) docker() (*docker.Provider, error) {
	return docker.New(docker.Options{Host: o.DockerHost, Image: o.DockerImage, Berth: o.Berth, UID: o.UID,
		Limits: o.Limits, Instance: o.Instance})
}

// newShimCmd is the hidden command a daemon runs once per session to hold
// its agent (see package shim). The job comes on stdin.
func newShimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "shim --options JSON",
		Short:  "Hold one session's agent for the daemon (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Only SIGTERM and SIGINT sent to the shim itself stop it.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
			raw, _ := cmd.Flags().GetString("options")
			var opts providerOptions
			if err := json.Unmarshal([]byte(raw), &opts); err != nil {
				return usagef(cmd, "--options: %v", err)
			}
			b, err := io.ReadAll(os.Stdin)
			if err != nil {
				return fmt.Errorf("read the job: %w", err)
			}
			if len(b) == 0 {
				// A spare the daemon never needed: it closed our stdin.
				return nil
			}
			var job shim.Config
			if err := json.Unmarshal(b, &job); err != nil {
				return berth.WrapError(berth.EInvalid, err, "decode the job")
			}
			if job.Log != "" {
				// The shim's log and anything written to its stderr (a panic) go to the session's shim log.
				if f, err := os.OpenFile(job.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
					_ = unix.Dup2(int(f.Fd()), 2)
					_ = f.Close()
				}
			}
			// The shim's log is a file: JSON lines, about its session.
			logger, _ := newLogger("json", "info")
			logger = logger.With("shim", os.Getpid(), "session_id", job.SessionID)
			p, closeProvider, err := opts.provider(job.Provider)
			if err != nil {
				_ = json.NewEncoder(os.Stdout).Encode(shim.Ready{ShimPID: os.Getpid(), Stage: "sandbox", Code: berth.ErrorCode(err), Error: berth.ErrorMessage(err)})
				return err
			}
			defer closeProvider()
			ready := os.Stdout
			err = shim.Serve(ctx, p, job, ready, logger)
			_ = ready.Close()
			return err
		},
	}
	cmd.Flags().String("options", "{}", "the daemon's sandbox provider options, as JSON")
	return cmd
}
