package client_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/acp/demoagent"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/internal/mcprelay"
)

// TestMain lets this test binary stand in for the berth binary: the
// daemons the tests and examples open run it as the demo agent
// (`berth agent-demo`) and as the berth MCP server's relay (`berth mcp`). Every
// test must leave no goroutine behind: the client starts none of its own.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "agent-demo":
			os.Exit(demoagent.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "mcp":
			os.Exit(mcprelay.Main())
		}
	}
	goleak.VerifyTestMain(m)
}

// openDaemon opens a daemon in this process on home, listening on its Unix
// socket (and on a loopback port when tcp), with the demo agent running in
// the host sandbox as the daemon's own child; it serves until Close.
func openDaemon(ctx context.Context, home string, tcp bool) (*daemon.Daemon, error) {
	cfg := config.Default()
	cfg.Sandbox.Default = "host"
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	o := daemon.Options{Home: home, Config: cfg, Socket: filepath.Join(home, "berth.sock"), Berth: self, NoShims: true}
	if tcp {
		o.Addr = "127.0.0.1:0"
	}
	d, err := daemon.Open(ctx, o)
	if err != nil {
		return nil, err
	}
	d.Start()
	return d, nil
}

// exampleDaemon opens a daemon in this process on a temporary home and
// returns the address of its socket; stop closes it and removes the home.
func exampleDaemon(ctx context.Context) (d *daemon.Daemon, addr string, stop func(), err error) {
	home, err := os.MkdirTemp("", "berth-example-")
	if err != nil {
		return nil, "", nil, err
	}
	d, err = openDaemon(ctx, home, false)
	if err != nil {
		os.RemoveAll(home)
		return nil, "", nil, err
	}
	return d, "unix:" + filepath.Join(home, "berth.sock"), func() {
		d.Close(ctx)
		os.RemoveAll(home)
	}, nil
}
