package checkpoint

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// watchMask is every change to a directory's entries, or to a file in it,
// that a checkpoint could record differently: content, size, times, mode,
// links, names, and the directory itself going away. Reads are not in it.
const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// watcher is the store's one inotify instance (an instance per session
// would meet the kernel's limit of 128 per user at once): it marks each
// warm capture dirty when a directory it walked changes. Its reader drains
// the queue as events come; sync (a Take) drains what is queued first,
// and the kernel queues an event before the write that causes it returns,
// so no change made before the question is missed.
type watcher struct {
	fd int
	f  *os.File
	// budget bounds the directories watched at once (watchBudget).
	budget int
	// mu guards the reads of fd, wds and closed.
	mu     sync.Mutex
	wds    map[int32]*dirWatch
	buf    []byte
	closed bool
	// done is closed when the reader has returned.
	done chan struct{}
}

// dirWatch is one watched directory: how many walks added it, and the
// warm captures to mark when it changes.
type dirWatch struct {
	refs int
	subs map[*Warm]struct{}
}

// newWatcher opens the inotify instance and starts its reader, which
// Close stops.
func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &watcher{fd: fd, f: os.NewFile(uintptr(fd), "inotify"), wds: map[int32]*dirWatch{},
		buf: make([]byte, 64<<10), done: make(chan struct{}), budget: watchBudget()}
	rc, err := w.f.SyscallConn()
	if err != nil {
		_ = w.f.Close()
		return nil, err
	}
	go w.read(rc)
	return w, nil
}

// read drains the queue each time it has events, until Close.
func (w *watcher) read(rc syscall.RawConn) {
	defer close(w.done)
	_ = rc.Read(func(uintptr) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.drainLocked()
		return w.closed
	})
}

// drainLocked reads every queued event and marks what they touch.
func (w *watcher) drainLocked() {
	for !w.closed {
		n, err := unix.Read(w.fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		w.dispatchLocked(w.buf[:n])
	}
}

// dispatchLocked marks the captures each event in buf touches. A queue
// that overflowed lost events: every capture is marked.
func (w *watcher) dispatchLocked(buf []byte) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		wd := int32(binary.NativeEndian.Uint32(buf[off:]))
		mask := binary.NativeEndian.Uint32(buf[off+4:])
		off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
		if mask&unix.IN_Q_OVERFLOW != 0 {
			for _, d := range w.wds {
				d.mark()
			}
			continue
		}
		d := w.wds[wd]
		if d == nil {
			continue
		}
		d.mark()
		if mask&unix.IN_IGNORED != 0 {
			// The kernel dropped the watch (the directory is gone).
			delete(w.wds, wd)
		}
	}
}

// mark makes every capture watching d dirty.
func (d *dirWatch) mark() {
	for wm := range d.subs {
		wm.markDirty()
	}
}

// add watches the open directory dir for wm and returns its watch
// descriptor. The watch is added through the descriptor, so it is on the
// very directory the walk lists, whatever its path became meanwhile.
func (w *watcher) add(wm *Warm, dir *os.File) (int32, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, os.ErrClosed
	}
	if len(w.wds) >= w.budget {
		return 0, errOverBudget
	}
	// Under mu: no event of a new watch is drained before it has its capture.
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(int(dir.Fd())), watchMask)
	if err != nil {
		return 0, err
	}
	d := w.wds[int32(wd)]
	if d == nil {
		d = &dirWatch{subs: map[*Warm]struct{}{}}
		w.wds[int32(wd)] = d
	}
	d.refs++
	d.subs[wm] = struct{}{}
	return int32(wd), nil
}

// remove drops wm's watches; a directory no capture watches any more is
// no longer watched.
func (w *watcher) remove(wm *Warm, wds []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wd := range wds {
		d := w.wds[wd]
		if d == nil {
			continue
		}
		delete(d.subs, wm)
		if d.refs--; d.refs <= 0 {
			delete(w.wds, wd)
			if !w.closed {
				_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
			}
		}
	}
}

// sync drains what the kernel has queued, so that every change made
// before the call has marked its captures; false once the watcher is
// closed (it sees no change any more).
func (w *watcher) sync() (open bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drainLocked()
	return !w.closed
}

// close stops the reader and closes the instance.
func (w *watcher) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	// Wakes the reader, which sees closed.
	_ = w.f.Close()
	<-w.done
}

// errOverBudget refuses a watch past the watcher's budget.
var errOverBudget = errors.New("berth watches its share of the user's inotify watches already")

// watchBudget is a quarter of the user's inotify watches
// (fs.inotify.max_user_watches): they are the user's too, and an editor
// that finds none left stops seeing its files. A capture that would go
// past it is not taken ahead (the turn walks).
func watchBudget() int {
	n := 8192
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
			n = v
		}
	}
	return max(n/4, 1)
}

// watcher returns the store's inotify instance, opening it on first use.
func (s *Store) watcher() (*watcher, error) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watchClosed {
		return nil, os.ErrClosed
	}
	if s.watch == nil {
		w, err := newWatcher()
		if err != nil {
			return nil, err
		}
		s.watch = w
	}
	return s.watch, nil
}

// Close stops the store's watch on the workspaces of its warm captures
// (whose Take then finds them stale). The store's other methods keep
// working.
func (s *Store) Close() {
	s.watchMu.Lock()
	w := s.watch
	s.watch, s.watchClosed = nil, true
	s.watchMu.Unlock()
	if w != nil {
		w.close()
	}
}
