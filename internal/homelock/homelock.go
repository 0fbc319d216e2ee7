// Package homelock gives one daemon at a time a berth home: a daemon takes
// the home's lock before it touches the store, the shims or any agent, so a
// second daemon started on the same home leaves the first one's sessions
// alone. The lock is an flock(2) on $BERTH_HOME/berth.lock: the kernel drops
// it when its holder dies, so a dead daemon's lock is taken over at once.
package homelock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
)

// FileName is the lock file inside the home.
const FileName = "berth.lock"

// Holder is what a lock's holder writes into the lock file, for the
// message a refused daemon prints.
type Holder struct {
	PID       int       `json:"pid"`
	Addr      string    `json:"addr,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// Lock is an exclusive hold on a berth home. Its file is close-on-exec, so
// no shim or agent started by the holder keeps the lock after it dies.
type Lock struct {
	f      *os.File
	holder Holder
}

// takeoverWait is how long Acquire keeps trying a held lock: a daemon
// SIGKILLed a moment ago may still hold it through a child caught between
// fork and exec (the lock's file is close-on-exec, so the child drops it
// at its exec), or through its own exit still under way.
const takeoverWait = 3 * time.Second

// Acquire takes the lock of home, trying for up to takeoverWait while it
// is held. A home held by a live process is EUnavailable, naming the
// holder's pid and address.
func Acquire(home string) (*Lock, error) {
	path := filepath.Join(home, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot open the home's lock file")
	}
	deadline := time.Now().Add(takeoverWait)
	err = flock(f)
	for errors.Is(err, syscall.EWOULDBLOCK) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		err = flock(f)
	}
	if err != nil {
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, berth.WrapError(berth.EUnavailable, err, "cannot lock the berth home")
		}
		return nil, heldError(path)
	}
	l := &Lock{f: f, holder: Holder{PID: os.Getpid(), StartedAt: time.Now().UTC()}}
	if err := l.write(); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// flock takes an exclusive lock on f, retrying an interrupted call.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// heldError describes the live holder of the lock at path.
func heldError(path string) error {
	var h Holder
	// The holder writes its details just after taking the lock: a racing
	// reader may find the file empty.
	b, _ := os.ReadFile(path)
	if json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return berth.Errorf(berth.EUnavailable, "another berth daemon is using this home (its lock is held)")
	}
	where := ""
	if h.Addr != "" {
		where = fmt.Sprintf(", serving %s", h.Addr)
	}
	return &berth.Error{Code: berth.EUnavailable,
		Message: fmt.Sprintf("another berth daemon is using this home: pid %d%s, since %s", h.PID, where, h.StartedAt.Format(time.RFC3339)),
		Details: map[string]any{"pid": h.PID, "addr": h.Addr}}
}

// SetAddr records where the holder serves, once it listens.
func (l *Lock) SetAddr(addr string) error {
	l.holder.Addr = addr
	return l.write()
}

// write replaces the lock file's content with the holder's details. The
// file is rewritten in place: replacing it would leave the lock on an
// unlinked inode that a second daemon would not see.
func (l *Lock) write() error {
	b, _ := json.Marshal(l.holder)
	if err := l.f.Truncate(0); err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot write the home's lock file")
	}
	if _, err := l.f.WriteAt(append(b, '\n'), 0); err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot write the home's lock file")
	}
	return nil
}

// Release drops the lock. The file stays: removing it would let a daemon
// starting now lock a new file while another still holds the old one.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
