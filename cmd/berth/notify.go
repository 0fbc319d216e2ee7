package main

import (
	"log/slog"
	"net"
	"os"
)

// notifier speaks systemd's notify protocol (sd_notify(3)) to the service
// manager that started the daemon with Type=notify: READY=1 once the API
// serves, STOPPING=1 when shutdown begins. The socket is read once at start
// and taken out of the environment, so that shims and agents never inherit
// it (go-systemd's SdNotify reads the variable at every call and can only
// unset it after one message, which would lose STOPPING). Without
// NOTIFY_SOCKET it does nothing.
type notifier struct {
	addr   *net.UnixAddr
	logger *slog.Logger
}

// newNotifier takes NOTIFY_SOCKET out of the environment.
func newNotifier(logger *slog.Logger) *notifier {
	path, ok := os.LookupEnv("NOTIFY_SOCKET")
	_ = os.Unsetenv("NOTIFY_SOCKET")
	if !ok || path == "" {
		return &notifier{logger: logger}
	}
	// A leading @ names a socket in the abstract namespace.
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	return &notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}, logger: logger}
}

// send writes one notify message (lines of KEY=VALUE); a failure is logged,
// never fatal: the daemon serves whether or not anyone listens.
func (n *notifier) send(state string) {
	if n.addr == nil {
		return
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err == nil {
		_, err = conn.Write([]byte(state))
		_ = conn.Close()
	}
	if err != nil {
		n.logger.Warn("service manager notify", "state", state, "err", err)
	}
}
