package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/berth-sh/berth/internal/linkcheck"
	ignore "github.com/sabhiram/go-gitignore"
)

// maxIgnoreBytes bounds a .gitignore file read; a larger one is not used.
const maxIgnoreBytes = 256 << 10

// Bounds on the .gitignore files one walk uses. go-gitignore compiles each
// pattern to a regular expression (kilobytes each) and matches every path
// against every pattern above it, so an agent's .gitignore files could
// otherwise make one checkpoint take gigabytes and hours of the daemon's
// CPU. A file past a bound is not used: what it would have ignored is
// recorded, within the checkpoint's other limits.
const (
	// maxIgnorePatterns: one file's patterns; maxIgnoreLineBytes one's length.
	maxIgnorePatterns  = 1000
	maxIgnoreLineBytes = 1024
	// maxIgnoreStackPatterns: the patterns in effect at once (the files of
	// a directory and those above it).
	maxIgnoreStackPatterns = 4000
	// maxIgnoreWalkPatterns: the patterns one walk compiles.
	maxIgnoreWalkPatterns = 20000
	// defaultIgnoreWork bounds the matching of one walk, counted as
	// patterns times path bytes: past it no path is matched any more.
	defaultIgnoreWork = 4 << 30
)

// ignoreLevel is the .gitignore of one directory: its patterns apply to
// the paths below dir (relative to it).
type ignoreLevel struct {
	dir string
	gi  *ignore.GitIgnore
	// n counts its patterns.
	n int
}

// visit is one path the walker found.
type visit struct {
	entry Entry
	// dir is the open directory holding the path, name its base name.
	dir  *os.Root
	name string
}

// walker walks a workspace one directory at a time, never following a
// symlink, in path order. It leaves out what a checkpoint skips and
// reports each path kept to fn.
type walker struct {
	ctx     context.Context
	root    *os.Root
	opts    Options
	hide    []fs.FileInfo
	ignores []ignoreLevel
	// stackPatterns counts the patterns of ignores, walkPatterns those
	// compiled in this walk, ignoreWork the matching done (see the
	// bounds above); ignoreOff is set once that is spent.
	stackPatterns, walkPatterns int
	ignoreWork                  int64
	ignoreOff                   bool
	skipped                     []Skip
	skipN                       int
	entries                     int
	fileSize                    int64
	// depth is the level of the directory being walked ("." is 0);
	// pathBytes sums the lengths of the paths kept.
	depth     int
	pathBytes int
	// sigs records, for each directory walked, which .gitignore files
	// apply below it (their directories and contents); known says whether
	// a path was kept by the previous walk, whose sigs are prevSigs. A
	// path kept before under the same .gitignore files is not matched
	// again.
	sigs     map[string]string
	prevSigs map[string]string
	known    func(p string) bool
	// fn is told of each kept path; it returns false to skip a regular
	// file after all (with the reason it gives).
	fn func(v *visit) (keep bool, reason string, err error)
	// onDir, when set, is given each directory open before it is listed,
	// and onFile each regular file about to be kept (a warm capture's
	// watch: warm.go).
	onDir  func(d *os.File) error
	onFile func(fi fs.FileInfo)
}

// skip records a left-out path.
func (w *walker) skip(p, reason string) {
	w.skipN++
	if len(w.skipped) < MaxListedSkips {
		w.skipped = append(w.skipped, Skip{Path: p, Reason: reason})
	}
}

// isHidden reports whether fi is one of the hidden paths.
func (w *walker) isHidden(fi fs.FileInfo) bool {
	for _, h := range w.hide {
		if os.SameFile(fi, h) {
			return true
		}
	}
	return false
}

// ignored reports whether rel matches the .gitignore files above it.
func (w *walker) ignored(rel string, isDir bool) bool {
	if w.ignoreOff {
		return false
	}
	for i := len(w.ignores) - 1; i >= 0; i-- {
		l := w.ignores[i]
		sub := rel
		if l.dir != "." {
			var ok bool
			if sub, ok = strings.CutPrefix(rel, l.dir+"/"); !ok {
				continue
			}
		}
		if isDir {
			sub += "/"
		}
		if w.ignoreWork += int64(l.n) * int64(len(sub)+1); w.ignoreWork > w.opts.ignoreWork {
			w.ignoreOff = true
			return false
		}
		if l.gi.MatchesPath(sub) {
			return true
		}
	}
	return false
}

// walkDir walks the directory dir, whose path is rel ("." for the root),
// under the .gitignore files sig names.
func (w *walker) walkDir(dir *os.Root, rel, sig string) error {
	names, ok, err := w.list(dir, rel)
	if err != nil || !ok {
		return err
	}
	sig, pushed := w.pushIgnore(dir, rel, sig)
	if pushed {
		defer w.popIgnore()
	}
	if w.sigs != nil {
		w.sigs[rel] = sig
	}
	// Kept before under the same .gitignore files: kept now.
	same := w.known != nil && w.prevSigs != nil && w.prevSigs[rel] == sig
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if err := w.visitName(dir, rel, name, sig, same); err != nil {
			return err
		}
	}
	return nil
}

// list returns the names in dir (whose path is rel) sorted; ok is false
// when the directory's content is left out (unreadable, or a listing over
// Options.MaxListBytes), recorded as a skip.
func (w *walker) list(dir *os.Root, rel string) (names []string, ok bool, err error) {
	whole := false
	d, err := dir.Open(".")
	if err == nil && w.onDir != nil {
		if err = w.onDir(d); err != nil {
			_ = d.Close()
			return nil, false, err
		}
	}
	if err == nil {
		names, whole, err = readNames(d, w.opts.MaxListBytes)
		_ = d.Close()
	}
	if errors.Is(err, fs.ErrPermission) {
		// Searchable but not readable (mode 100): what is in it is left.
		w.skip(rel, SkipUnreadable)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !whole {
		w.skip(rel, SkipTotal)
		return nil, false, nil
	}
	slices.Sort(names)
	return names, true, nil
}

// pushIgnore puts the .gitignore of dir (whose path is rel) on the stack
// when it has one within the bounds, and returns sig naming it too;
// pushed says whether popIgnore must take it off.
func (w *walker) pushIgnore(dir *os.Root, rel, sig string) (_ string, pushed bool) {
	if w.opts.Whole {
		return sig, false
	}
	room := min(maxIgnorePatterns, maxIgnoreStackPatterns-w.stackPatterns, maxIgnoreWalkPatterns-w.walkPatterns)
	gi, sum, n := readIgnore(dir, room)
	if gi == nil {
		return sig, false
	}
	w.ignores = append(w.ignores, ignoreLevel{dir: rel, gi: gi, n: n})
	w.stackPatterns += n
	w.walkPatterns += n
	return sig + "|" + rel + ":" + sum, true
}

// popIgnore takes the last .gitignore pushed off the stack.
func (w *walker) popIgnore() {
	w.stackPatterns -= w.ignores[len(w.ignores)-1].n
	w.ignores = w.ignores[:len(w.ignores)-1]
}

// visitName looks once at the entry name of dir (whose path is rel), then
// leaves it out, walks it (a directory) or keeps it.
func (w *walker) visitName(dir *os.Root, rel, name, sig string, same bool) error {
	// The one look the walk takes at the entry.
	fi, err := dir.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	p := name
	if rel != "." {
		p = rel + "/" + name
	}
	if reason := w.leaveOut(p, name, fi, same); reason != "" {
		w.skip(p, reason)
		return nil
	}
	v := &visit{entry: entryOf(p, fi), dir: dir, name: name}
	switch mode := fi.Mode(); {
	case mode.IsDir():
		return w.subdir(dir, name, p, fi, v, sig)
	case mode&fs.ModeSymlink != 0:
		return w.symlink(dir, name, p, v)
	case mode.IsRegular():
		return w.file(p, fi, v)
	default:
		w.skip(p, SkipSpecial)
		return nil
	}
}

// leaveOut is why the path p (base name name, found as fi) is left out
// whatever it holds, "" when it is not: version control, hidden, ignored
// (unless kept before under the same .gitignore files, which same says),
// too deep, or past the walk's totals.
func (w *walker) leaveOut(p, name string, fi fs.FileInfo, same bool) string {
	isDir := fi.Mode().IsDir()
	switch {
	case name == ".git" && !w.opts.Whole:
		return SkipVCS
	case w.isHidden(fi):
		return SkipHidden
	case !w.opts.Whole && len(w.ignores) > 0 && !(same && w.known(p)) && w.ignored(p, isDir):
		return SkipGitignore
	case len(p) > MaxPathBytes || (isDir && w.depth >= MaxDepth):
		return SkipTooDeep
	case w.entries >= w.opts.MaxEntries || w.pathBytes+len(p) > w.opts.MaxPathTotalBytes:
		return SkipTotal
	}
	return ""
}

// symlink keeps the link name of dir, at p, unless its target leads out
// of the workspace.
func (w *walker) symlink(dir *os.Root, name, p string, v *visit) error {
	target, err := dir.Readlink(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if linkcheck.LexicallyEscapes(p, target) || linkcheck.Escapes(w.root, p, target) {
		w.skip(p, SkipLinkOutside)
		return nil
	}
	v.entry.Target = target
	return w.keep(v)
}

// file keeps the regular file at p, found as fi, unless it is over the
// bounds of a file or of the walk's bytes.
func (w *walker) file(p string, fi fs.FileInfo, v *visit) error {
	if fi.Size() > w.opts.MaxFileBytes {
		w.skip(p, SkipTooLarge)
		return nil
	}
	if w.fileSize+fi.Size() > w.opts.MaxTotalBytes {
		w.skip(p, SkipTotal)
		return nil
	}
	if w.onFile != nil {
		w.onFile(fi)
	}
	return w.keep(v)
}

// A name of a directory's listing costs its length and listCost more
// (Options.MaxListBytes); names are read listBatch at a time.
const (
	listCost  = 32
	listBatch = 1024
)

// readNames reads the names in the open directory d; whole is false (and
// names nil) when they cost more than max.
func readNames(d *os.File, max int) (names []string, whole bool, err error) {
	size := 0
	for {
		batch, err := d.Readdirnames(listBatch)
		for _, n := range batch {
			size += len(n) + listCost
		}
		if size > max {
			return nil, false, nil
		}
		names = append(names, batch...)
		if errors.Is(err, io.EOF) {
			return names, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// keep hands v to fn and counts it.
func (w *walker) keep(v *visit) error {
	keep, reason, err := w.fn(v)
	if err != nil {
		return err
	}
	if !keep {
		w.skip(v.entry.Path, reason)
		return nil
	}
	w.entries++
	w.pathBytes += len(v.entry.Path)
	if v.entry.Kind == KindFile {
		w.fileSize += v.entry.Size
	}
	return nil
}

// subdir walks the directory name of dir, found by Lstat as fi: what opens
// must be that directory (not a link swapped in meanwhile).
func (w *walker) subdir(dir *os.Root, name, p string, fi fs.FileInfo, v *visit, sig string) error {
	sub, err := openDir(dir, name, fi)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, errSwapped) {
		w.skip(p, SkipChanged)
		return nil
	}
	if errors.Is(err, fs.ErrPermission) {
		w.skip(p, SkipUnreadable)
		return nil
	}
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := w.keep(v); err != nil {
		return err
	}
	w.depth++
	defer func() { w.depth-- }()
	return w.walkDir(sub, p, sig)
}

// errSwapped is a path that changed between a look and an open.
var errSwapped = errors.New("changed while it was opened")

// openDir opens the directory name of dir, which Lstat found as fi (nil:
// look now), refusing anything but that very directory: a symlink, or a
// directory swapped in after the look.
func openDir(dir *os.Root, name string, fi fs.FileInfo) (*os.Root, error) {
	if fi == nil {
		var err error
		if fi, err = dir.Lstat(name); err != nil {
			return nil, err
		}
	}
	if !fi.IsDir() {
		return nil, errSwapped
	}
	sub, err := dir.OpenRoot(name)
	if err != nil {
		if strings.Contains(err.Error(), "path escapes from parent") {
			return nil, errSwapped
		}
		return nil, err
	}
	st, err := sub.Stat(".")
	if err != nil || !os.SameFile(st, fi) {
		_ = sub.Close()
		if err == nil {
			err = errSwapped
		}
		return nil, err
	}
	return sub, nil
}

// openFile opens the regular file name of dir for reading without blocking
// (a FIFO swapped in cannot hang it) and checks that what opened is what
// name names (os.Root follows a link swapped in).
func openFile(dir *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if strings.Contains(err.Error(), "path escapes from parent") || errors.Is(err, syscall.ELOOP) {
			return nil, nil, errSwapped
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		now, lerr := dir.Lstat(name)
		if lerr != nil || !os.SameFile(fi, now) || !fi.Mode().IsRegular() {
			err = errSwapped
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readIgnore compiles the .gitignore of dir, if it has a regular one of
// at most room patterns (none over maxIgnoreLineBytes), and returns it
// with a digest of its content and its count of patterns.
func readIgnore(dir *os.Root, room int) (*ignore.GitIgnore, string, int) {
	f, fi, err := openFile(dir, ".gitignore")
	if err != nil {
		return nil, "", 0
	}
	defer f.Close()
	if fi.Size() > maxIgnoreBytes {
		return nil, "", 0
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIgnoreBytes))
	if err != nil {
		return nil, "", 0
	}
	lines := strings.Split(string(b), "\n")
	n := 0
	for _, l := range lines {
		if len(l) > maxIgnoreLineBytes {
			return nil, "", 0
		}
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			n++
		}
	}
	if n > room {
		return nil, "", 0
	}
	sum := sha256.Sum256(b)
	return ignore.CompileIgnoreLines(lines...), hex.EncodeToString(sum[:16]), n
}

// entryOf describes the path p from its Lstat.
func entryOf(p string, fi fs.FileInfo) Entry {
	e := Entry{Path: p, Mode: uint32(fi.Mode().Perm())}
	switch mode := fi.Mode(); {
	case mode.IsDir():
		e.Kind = KindDir
	case mode&fs.ModeSymlink != 0:
		e.Kind = KindSymlink
		e.Mode = 0o777
	default:
		e.Kind = KindFile
		e.Size = fi.Size()
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.MTime = st.Mtim.Nano()
		e.CTime = st.Ctim.Nano()
		e.Ino = st.Ino
		e.Dev = uint64(st.Dev) //nolint:unconvert // Dev is uint32 on some platforms
		e.UID, e.GID = int(st.Uid), int(st.Gid)
	}
	return e
}

// parentOf is the directory part of a slash path ("." at the top).
func parentOf(p string) string { return path.Dir(p) }
