// Package pretouch maps the pages of the Go heap's newest chunk in one
// system call, so that the allocations about to fill them take no page
// fault each; and, for the daemon, the pages of the program's code and
// read-only data, so that its start takes no fault for each 64 KiB of
// code it first runs.
//
// On a virtual machine a page fault can cost ~15 µs (measured on the
// 2-vCPU machines berth is benchmarked on) against ~1 µs a page for the
// kernel populating a range at once; the CLI and the daemon initialise
// about a megabyte of library tables, spread over a few megabytes of
// fresh heap, before main runs. The JVM's AlwaysPreTouch is the same idea
// for a whole heap; this is one chunk, a few megabytes of resident memory
// at most, and so only for processes that fill it anyway: not the hidden
// commands that live beside each agent (package roles), whose memory is
// paid once per session.
//
// Its init is the work: cmd/berth imports it for the side effect. It
// imports only packages that initialise first, so it runs before most of
// the standard library's and every other library's initialisation.
package pretouch

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/berth-sh/berth/cmd/berth/internal/roles"
)

func init() {
	if roles.LongLived(os.Args) {
		close(programDone)
		return
	}
	Heap()
	if !roles.Daemon(os.Args) {
		close(programDone)
		return
	}
	// On the other core: the start goes on meanwhile, faulting in only
	// what it runs before the populate reaches it (3 ms sooner to the
	// API than populating first, measured).
	go func() {
		defer close(programDone)
		Program()
	}()
}

// programDone is closed once the program's code and read-only data are
// mapped (Program), or at once in a process that does not map them.
var programDone = make(chan struct{})

// Wait returns once init's Program is over: the owner of its goroutine
// (the daemon, on its way out) waits for it.
func Wait() { <-programDone }

// madvPopulateRead is MADV_POPULATE_READ (Linux 5.14): map a range's
// pages readable, as reads would, reading what is not in the page cache.
const madvPopulateRead = 22

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault in a range
// writable, as writes would. Older kernels answer EINVAL, and the pages
// are then faulted one at a time as before.
const madvPopulateWrite = 23

// maxChunk bounds what Heap populates: the runtime maps a new heap 4 MiB
// at a time; a mapping larger than this is not a fresh process's (or a
// runtime that maps its arenas whole), and populating it would cost more
// than it saves.
const maxChunk = 8 << 20

// probe is the allocation whose address finds the heap's chunk.
var probe *[64]byte

// Heap populates the writable anonymous mapping that holds a fresh heap
// allocation, when it is at most maxChunk, and reports how many bytes it
// asked for (0 when it did not).
func Heap() int {
	probe = new([64]byte)
	addr := uintptr(unsafe.Pointer(probe))
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	start, end, ok := mappingOf(maps, addr)
	if !ok || end-start > maxChunk {
		return 0
	}
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvPopulateWrite); e != 0 {
		return 0
	}
	return int(end - start)
}

// maxProgram bounds what Program populates of each of the program's
// mappings: berth's code and read-only data are 18 and 22 MB.
const maxProgram = 128 << 20

// rodata is a constant whose bytes lie in the program's read-only data.
const rodata = "berth"

// Program maps the pages of the program's code and read-only data at
// once, and reports how many bytes it asked for (0 when it could not).
//
// Code pages are faulted in 64 KiB at a time as they first run: a
// daemon's start runs code from a few hundred places in its 40 MB
// (~30 µs a fault on the machines berth is benchmarked on), against
// ~0.2 µs a page for the kernel populating the range from the page
// cache. The daemon touches most of it anyway (its file-backed RSS is
// ~30 MB after an empty start, 41 MB populated); the pages are the page
// cache's, shared with every process running the same file.
func Program() int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	code := **(**uintptr)(unsafe.Pointer(&programFunc))
	total := 0
	for _, m := range []struct {
		addr uintptr
		perm string
	}{{code, "r-xp"}, {uintptr(unsafe.Pointer(unsafe.StringData(rodata))), "r--p"}} {
		start, end, ok := mappingWith(maps, m.addr, m.perm)
		if !ok || end-start > maxProgram {
			continue
		}
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvPopulateRead); e == 0 {
			total += int(end - start)
		}
	}
	return total
}

// programFunc is a function value whose code lies in the program's text.
var programFunc = textMark

// textMark is code of the program: its address finds the text mapping.
func textMark() {}

// mappingOf finds the private writable mapping of /proc/self/maps that
// holds addr.
func mappingOf(maps []byte, addr uintptr) (start, end uintptr, ok bool) {
	return mappingWith(maps, addr, "rw-p")
}

// mappingWith finds the mapping of /proc/self/maps with permissions perm
// that holds addr.
func mappingWith(maps []byte, addr uintptr, perm string) (start, end uintptr, ok bool) {
	for line := range bytes.Lines(maps) {
		rng, rest, _ := bytes.Cut(line, []byte(" "))
		if !bytes.HasPrefix(rest, []byte(perm)) {
			continue
		}
		lo, hi, _ := bytes.Cut(rng, []byte("-"))
		s, err1 := strconv.ParseUint(string(lo), 16, 64)
		e, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 == nil && err2 == nil && uintptr(s) <= addr && addr < uintptr(e) {
			return uintptr(s), uintptr(e), true
		}
	}
	return 0, 0, false
}
