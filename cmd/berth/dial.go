package main

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/config"
)

// defaultAddr is where the daemon listens unless told otherwise.
const defaultAddr = bclient.DefaultAddr

// socketName is the daemon's Unix socket inside the home directory.
const socketName = bclient.SocketName

// flagOrEnv returns the value of a flag when it was given, else the
// environment variable env.
func flagOrEnv(cmd *cobra.Command, name, env string) string {
	if f := cmd.Flag(name); f != nil && f.Changed {
		return f.Value.String()
	}
	return os.Getenv(env)
}

// homeDir returns the berth home: --home, else $BERTH_HOME, else ~/.berth.
// A leading "~/" is expanded.
func homeDir(cmd *cobra.Command) (string, error) {
	home := flagOrEnv(cmd, "home", "BERTH_HOME")
	if home == "" || home == "~" || strings.HasPrefix(home, "~/") {
		user, err := os.UserHomeDir()
		if err != nil {
			return "", usagef(cmd, "cannot find the home directory (set --home or BERTH_HOME): %v", err)
		}
		switch {
		case home == "":
			home = filepath.Join(user, ".berth")
		default:
			home = filepath.Join(user, strings.TrimPrefix(strings.TrimPrefix(home, "~"), "/"))
		}
	}
	return filepath.Abs(home)
}

// dial returns a client of the daemon: at --addr ($BERTH_ADDR) when given
// (host:port, http(s)://host:port, or unix:PATH); else on the home's Unix
// socket when it exists; else at the home's address. The socket, address
// and token come from the home's config when it sets them (defaults:
// $home/berth.sock, 127.0.0.1:7380); --token or $BERTH_TOKEN wins, and over
// TCP the token the daemon keeps in $home/token comes last.
func dial(cmd *cobra.Command) (*bclient.Client, error) {
	token := flagOrEnv(cmd, "token", "BERTH_TOKEN")
	cfg := homeConfig(cmd)
	if token == "" && cfg != nil {
		token = cfg.Server.Token
	}
	// tcpToken adds the home's generated token when nothing else gave one.
	tcpToken := func() string {
		if token != "" {
			return token
		}
		if home, err := homeDir(cmd); err == nil {
			return bclient.ReadToken(home)
		}
		return ""
	}
	if addr := flagOrEnv(cmd, "addr", "BERTH_ADDR"); addr != "" {
		if path, ok := strings.CutPrefix(addr, "unix:"); ok {
			if path == "" {
				return nil, usagef(cmd, "--addr unix: needs a socket path")
			}
			return bclient.New("unix:"+path, bclient.WithToken(token))
		}
		if strings.Contains(addr, "://") {
			u, err := url.Parse(addr)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, usagef(cmd, "bad --addr %q: want host:port, http://host:port or unix:PATH", addr)
			}
		}
		return bclient.New(addr, bclient.WithToken(tcpToken()))
	}
	home, err := homeDir(cmd)
	if err != nil {
		return nil, err
	}
	// Where the daemon of this home listens: its config says, else the defaults.
	sock, addr := homeSocket(home, cfg), defaultAddr
	if cfg != nil {
		addr = cfg.Server.Addr
	}
	if isSocket(sock) {
		return bclient.New("unix:"+sock, bclient.WithToken(token))
	}
	return bclient.New(addr, bclient.WithToken(tcpToken()))
}

// homeSocket is the Unix socket the daemon of home listens on: its
// config's (cfg may be nil), else $home/berth.sock.
func homeSocket(home string, cfg *config.Config) string {
	if cfg != nil && cfg.Server.Socket != "" {
		return cfg.Server.Socket
	}
	return filepath.Join(home, socketName)
}

// isSocket reports whether path is a Unix socket.
func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&fs.ModeSocket != 0
}

// homeConfig returns the home's config (with its environment overrides),
// or nil when it does not load: the daemon then says what is wrong.
func homeConfig(cmd *cobra.Command) *config.Config {
	home, err := homeDir(cmd)
	if err != nil {
		return nil
	}
	cfg, err := config.LoadDefault(home, os.Environ())
	if err != nil {
		return nil
	}
	return cfg
}
