package shim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/internal/rawsock"
)

// MaxSocketPath is the longest Unix socket path Linux takes, less its NUL.
const MaxSocketPath = 107

// Bundle is the run-directory layout of one shim: the files it makes,
// named in one place. A session's shim keeps <session>.<nonce>.spool,
// .log and .pid, and listens on <nonce>.sock, short for the 107 bytes a
// socket path may have. Each shim has a nonce of its own, so a shim still
// exiting never removes the files of the next one (a quick stop and
// resume). Its JSON fields are those of Config.
type Bundle struct {
	// Socket is the Unix socket the shim listens on; Spool the file it
	// appends the agent's stdout to. Both are removed when it exits.
	Socket string `json:"socket"`
	Spool  string `json:"spool"`
	// Log is the file the shim writes its own log (and stderr) to.
	Log string `json:"log,omitempty"`
	// PIDFile is where the shim writes its pid: a later daemon finds a
	// shim whose socket is gone by it.
	PIDFile string `json:"pid_file"`
}

// NewBundle names the files of session id's shim with nonce in runDir.
func NewBundle(runDir, id, nonce string) Bundle {
	base := filepath.Join(runDir, id+"."+nonce)
	return Bundle{Socket: filepath.Join(runDir, nonce+".sock"), Spool: base + ".spool", Log: base + ".log", PIDFile: base + ".pid"}
}

// BundleOf names the files of session id's shim listening on socket.
func BundleOf(socket, id string) Bundle {
	return NewBundle(filepath.Dir(socket), id, nonceOf(socket))
}

// nonceOf is the nonce of the shim listening on socket.
func nonceOf(socket string) string {
	return strings.TrimSuffix(filepath.Base(socket), ".sock")
}

// ScanRunDir lists the shims whose files are in runDir: each bundle with
// its session, and the sockets that have no files beside them (a shim
// whose files were removed, or a dead socket), as bundles of a socket
// alone.
func ScanRunDir(runDir string) (map[Bundle]string, []Bundle) {
	entries, err := ReadRunDir(runDir)
	if err != nil {
		return nil, nil
	}
	return ScanEntries(runDir, entries)
}

// ReadRunDir reads the entries of runDir, in no order: a boot with a
// thousand sessions has five thousand there, and reads them once.
func ReadRunDir(runDir string) ([]os.DirEntry, error) {
	f, err := os.Open(runDir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// ScanEntries is ScanRunDir of the entries of runDir read already.
func ScanEntries(runDir string, entries []os.DirEntry) (map[Bundle]string, []Bundle) {
	bundles := map[Bundle]string{}
	socks := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if nonce, ok := strings.CutSuffix(name, ".sock"); ok && !strings.Contains(nonce, ".") {
			socks[name] = true
			continue
		}
		if parts := strings.Split(name, "."); len(parts) == 3 {
			bundles[NewBundle(runDir, parts[0], parts[1])] = parts[0]
		}
	}
	for b := range bundles {
		delete(socks, filepath.Base(b.Socket))
	}
	var strays []Bundle
	for name := range socks {
		strays = append(strays, Bundle{Socket: filepath.Join(runDir, name)})
	}
	return bundles, strays
}

// create makes the files a shim serves with: the spool (emptied), the pid
// file, and the socket, listening. Nothing is left behind when it fails.
func (b Bundle) create() (*os.File, *rawsock.Listener, error) {
	spool, err := os.OpenFile(b.Spool, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, core.WrapError(core.EInternal, err, "shim: spool")
	}
	// The pid file lets a later daemon find the shim when its socket is gone.
	if err := os.WriteFile(b.PIDFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		_ = spool.Close()
		_ = os.Remove(b.Spool)
		return nil, nil, core.WrapError(core.EInternal, err, "shim: pid file")
	}
	_ = os.Remove(b.Socket)
	ln, err := rawsock.Listen(b.Socket)
	if err != nil {
		_ = spool.Close()
		_ = os.Remove(b.Spool)
		_ = os.Remove(b.PIDFile)
		return nil, nil, core.WrapError(core.EInternal, err, "shim: listen")
	}
	_ = os.Chmod(b.Socket, 0o600)
	return spool, ln, nil
}

// Remove removes what a shim leaves once it is gone: its socket, spool
// and pid file (the shim removes them itself when it exits cleanly) and
// its log, kept when keepLog is set and it says something (why a shim
// failed).
func (b Bundle) Remove(keepLog bool) {
	b.removeServed()
	if b.Log == "" {
		return
	}
	if fi, err := os.Stat(b.Log); err == nil && (!keepLog || fi.Size() == 0) {
		_ = os.Remove(b.Log)
	}
}

// removeServed removes the files a shim makes to serve: its socket, spool
// and pid file.
func (b Bundle) removeServed() {
	for _, f := range []string{b.Socket, b.Spool, b.PIDFile} {
		if f != "" {
			_ = os.Remove(f)
		}
	}
}

// RemoveSessionBundles removes the files every shim of session id left in
// runDir (their sockets, named by nonce alone, go with each shim).
func RemoveSessionBundles(runDir, id string) {
	if runDir == "" {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(runDir, id+".*"))
	for _, f := range matches {
		_ = os.Remove(f)
	}
}

// ReadPID returns the pid a shim wrote to pidFile if that process is
// still a shim of runDir (a pid alone may have been reused), else 0.
func ReadPID(pidFile, runDir string) int {
	pid := readPIDFile(pidFile)
	if pid == 0 || !procfs.HasEnv(pid, EnvRun+"="+runDir) {
		return 0
	}
	return pid
}

// KillByPIDFile SIGKILLs the shim whose pid file is pidFile, if that pid
// is still a shim of runDir (procfs.KillIfEnv: a pid reused since is left
// alone). It returns the pid killed, or 0.
func KillByPIDFile(pidFile, runDir string) int {
	if pid := readPIDFile(pidFile); pid > 0 && procfs.KillIfEnv(pid, EnvRun+"="+runDir, false) {
		return pid
	}
	return 0
}

// readPIDFile returns the pid pidFile holds, or 0 when it holds none above 1.
func readPIDFile(pidFile string) int {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	return pid
}
