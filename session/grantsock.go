package session

import (
	"errors"
	"net"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// listenGrant listens on the Unix socket name in dir, a directory of the
// run directory runDir that an isolating sandbox has bound (the berth
// tools', the model gateway's): the directory is kept when it is there (a
// running sandbox has it bound), the socket made anew and given to the
// sandbox's uid (giveSocket). what names the socket in errors ("tools").
func listenGrant(runDir, dir, name string, provider berth.SandboxProvider, what string) (net.Listener, error) {
	sock := filepath.Join(dir, name)
	// The directory is made first: the sandbox binds it even when no
	// socket can be made in it.
	if err := makeGrantDir(runDir, dir, what); err != nil {
		return nil, err
	}
	if len(sock) > shim.MaxSocketPath {
		return nil, berth.Errorf(berth.EUnavailable, "the %s socket's path is longer than a Unix socket takes (%d bytes): use a shorter BERTH_HOME", what, shim.MaxSocketPath)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot remove the old %s socket", what)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot listen on the %s socket", what)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := giveSocket(dir, sock, provider, what); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// giveSocket sets the owner and modes of a granted socket and its
// directory: the sandbox's uid's alone when the provider runs it as
// another uid and the daemon may give files away, else the daemon's
// user's.
func giveSocket(dir, sock string, provider berth.SandboxProvider, what string) error {
	if err := os.Chmod(sock, 0o600); err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot set the %s socket's mode", what)
	}
	fo, ok := provider.(berth.SandboxFileOwner)
	if !ok {
		return nil
	}
	uid, gid, give := fo.FileOwner()
	if !give {
		return nil
	}
	for _, p := range []string{sock, dir} {
		if err := os.Lchown(p, uid, gid); err != nil {
			return berth.WrapError(berth.EUnavailable, err, "cannot give the %s socket to the sandbox's uid", what)
		}
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot set the %s directory's mode", what)
	}
	return nil
}

// makeGrantDir makes dir, a directory of the run directory runDir that
// an isolating sandbox binds, or keeps the one there (a running sandbox
// has it bound). what names it in errors.
func makeGrantDir(runDir, dir, what string) error {
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot create the run directory")
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return berth.WrapError(berth.EUnavailable, err, "cannot create the %s directory", what)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return berth.Errorf(berth.EUnavailable, "the %s directory is not a directory", what)
	}
	return nil
}
