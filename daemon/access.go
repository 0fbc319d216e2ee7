package daemon

import (
	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/eventlog"
	bhttp "github.com/berth-sh/berth/http"
	"github.com/berth-sh/berth/session"
)

// Addr returns the TCP address the API listens on ("" when none).
func (d *Daemon) Addr() string { return d.srv.Addr() }

// Socket returns the Unix socket the API listens on ("" when none).
func (d *Daemon) Socket() string { return d.socket }

// Token returns the bearer token TCP clients must send ("" when the config
// lets loopback clients in without one, or there is no TCP listener).
func (d *Daemon) Token() string { return d.token }

// Home returns the daemon's home directory.
func (d *Daemon) Home() string { return d.home }

// Config returns the daemon's configuration.
func (d *Daemon) Config() *config.Config { return d.cfg }

// Store returns the daemon's store.
func (d *Daemon) Store() berth.Store { return d.store }

// Log returns the daemon's event log.
func (d *Daemon) Log() *eventlog.Log { return d.log }

// Manager returns the daemon's session manager, the berth.SessionService
// in this process.
func (d *Daemon) Manager() *session.Manager { return d.mgr }

// Server returns the daemon's HTTP API server.
func (d *Daemon) Server() *bhttp.Server { return d.srv }

// Client returns a client of this daemon's API: over its Unix socket when
// it has one, else over TCP with its token.
func (d *Daemon) Client(opts ...client.Option) (*client.Client, error) {
	if d.socket != "" {
		return client.New("unix:"+d.socket, opts...)
	}
	return client.New(d.srv.Addr(), append([]client.Option{client.WithToken(d.token)}, opts...)...)
}
