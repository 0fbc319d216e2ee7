// Package pretouch maps the pages of the Go heap's newest chunk in one
// system call, so that the allocations about to fill them take no page
// fault each.
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
	if !roles.LongLived(os.Args) {
		Heap()
	}
}

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

// mappingOf finds the private writable mapping of /proc/self/maps that
// holds addr.
func mappingOf(maps []byte, addr uintptr) (start, end uintptr, ok bool) {
	for line := range bytes.Lines(maps) {
		rng, rest, _ := bytes.Cut(line, []byte(" "))
		if !bytes.HasPrefix(rest, []byte("rw-p")) {
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
