package http

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth"
)

// maxSocketPath is the longest path a Unix socket address can hold on Linux
// (sun_path is 108 bytes, NUL included).
const maxSocketPath = 107

// RequireLoopback refuses addr unless every address it names is loopback:
// without a configured token, the API must not be reachable from another
// machine (a generated token is only for this machine's users).
func RequireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return berth.WrapError(berth.EInvalid, err, "bad listen address %q: want host:port", addr)
	}
	refuse := berth.Errorf(berth.EInvalid,
		"refusing to listen on %s without an auth token: set [server] token (BERTH_SERVER_TOKEN) or listen on a loopback address", addr)
	if host == "" {
		return refuse
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	// A zone ("fe80::1%eth0") is not part of the IP.
	ipText, _, _ := strings.Cut(host, "%")
	if ip := net.ParseIP(ipText); ip != nil {
		if ip.IsLoopback() {
			return nil
		}
		return refuse
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return berth.WrapError(berth.EInvalid, err, "cannot resolve listen address %q", addr)
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return refuse
		}
	}
	return nil
}

// listenUnix binds a Unix socket at path with mode 0600. A socket file left
// by a dead daemon is removed first; one a live daemon answers on is
// EConflict; a path that is not a socket is never removed. The socket is
// made in a private directory, set to 0600 there and then linked into place,
// so no other user can connect in between.
func listenUnix(path string) (*net.UnixListener, error) {
	if err := clearStaleSocket(path); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot create the socket directory")
	}
	tmp, err := os.MkdirTemp(dir, ".sock-")
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot create the socket")
	}
	defer os.RemoveAll(tmp)
	tmpPath := filepath.Join(tmp, "s")
	if len(tmpPath) > maxSocketPath {
		// No room for the private directory: bind in place, then chmod.
		return listenUnixInPlace(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmpPath, Net: "unix"})
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot listen on the socket")
	}
	// The listener's own name goes away with tmp; Close removes path.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmpPath, 0o600); err != nil {
		ln.Close()
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot set the socket's mode")
	}
	// A hard link never replaces a file that appeared meanwhile.
	if err := os.Link(tmpPath, path); err != nil {
		ln.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, berth.WrapError(berth.EConflict, err, "another process created the socket at the same time")
		}
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot put the socket in place")
	}
	return ln, nil
}

// listenUnixInPlace binds path directly and sets its mode right after.
func listenUnixInPlace(path string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot listen on the socket")
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot set the socket's mode")
	}
	return ln, nil
}

// clearStaleSocket removes a socket file at path that nothing answers on.
func clearStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot inspect the socket path")
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return berth.WrapError(berth.EConflict, fmt.Errorf("%s is not a socket (mode %s)", path, fi.Mode()), "the socket path exists and is not a socket")
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return berth.WrapError(berth.EConflict, fmt.Errorf("%s answers", path), "another berth daemon is listening on the socket")
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return berth.WrapError(berth.EUnavailable, err, "cannot remove the stale socket")
	}
	return nil
}
