package pretouch

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// Heap leaves every page of the heap's chunk resident: mapped by the
// kernel in the one call, not as each is first written.
func TestHeapMapsTheChunkAtOnce(t *testing.T) {
	n := Heap()
	if n == 0 {
		t.Fatal("the heap's chunk was not populated (MADV_POPULATE_WRITE is Linux 5.14+)")
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	start, end, ok := mappingOf(maps, uintptr(unsafe.Pointer(probe)))
	if !ok || int(end-start) < n {
		t.Fatalf("the chunk of %d bytes is gone from the maps (%x-%x)", n, start, end)
	}
	page := uintptr(os.Getpagesize())
	vec := make([]byte, (uintptr(n)+page-1)/page)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, start, uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of the chunk's %d pages are not resident", missing, len(vec))
	}
}

func TestMappingOf(t *testing.T) {
	maps := []byte(`00400000-004ac000 r-xp 00000000 fe:00 10019365 /usr/bin/berth
0058f000-0059a000 rw-p 0018f000 fe:00 10019365 /usr/bin/berth
1c2124000000-1c2125c00000 ---p 00000000 00:00 0
1c2125c00000-1c2126000000 rw-p 00000000 00:00 0
7ffe6f1e7000-7ffe6f208000 rw-p 00000000 00:00 0 [stack]
`)
	for _, c := range []struct {
		addr       uintptr
		start, end uintptr
		ok         bool
	}{
		{0x1c2125fa0000, 0x1c2125c00000, 0x1c2126000000, true},
		{0x1c2125c00000, 0x1c2125c00000, 0x1c2126000000, true},
		{0x1c2126000000, 0, 0, false}, // one past the end
		{0x1c2124100000, 0, 0, false}, // reserved, not writable
		{0x00401000, 0, 0, false},     // text
	} {
		s, e, ok := mappingOf(maps, c.addr)
		if s != c.start || e != c.end || ok != c.ok {
			t.Errorf("mappingOf(%x) = %x, %x, %v; want %x, %x, %v", c.addr, s, e, ok, c.start, c.end, c.ok)
		}
	}
}

// Program leaves the whole of the program's code and read-only data
// mapped: smaps counts every page of both mappings resident in this
// process, not only those it has run or read.
func TestProgramMapsTheCodeAndReadOnlyData(t *testing.T) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	// Unmapped first (the pages stay in the page cache; those this test
	// runs or reads come back as it does): what is resident after Program
	// is what it mapped.
	for _, m := range []struct {
		addr uintptr
		perm string
	}{{**(**uintptr)(unsafe.Pointer(&programFunc)), "r-xp"}, {uintptr(unsafe.Pointer(unsafe.StringData(rodata))), "r--p"}} {
		start, end, ok := mappingWith(maps, m.addr, m.perm)
		if !ok {
			t.Fatalf("no %s mapping holds %x", m.perm, m.addr)
		}
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, syscall.MADV_DONTNEED); e != 0 {
			t.Fatal(e)
		}
	}
	if n := Program(); n == 0 {
		t.Fatal("nothing was populated (MADV_POPULATE_READ is Linux 5.14+)")
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	code := **(**uintptr)(unsafe.Pointer(&programFunc))
	data := uintptr(unsafe.Pointer(unsafe.StringData(rodata)))
	for _, addr := range []uintptr{code, data} {
		size, rss, ok := smapsOf(smaps, addr)
		if !ok {
			t.Fatalf("no mapping holds %x", addr)
		}
		if rss < size {
			t.Errorf("the mapping of %x: %d of its %d KiB resident", addr, rss, size)
		}
	}
}

// smapsOf reads the Size and Rss (KiB) of the mapping of smaps that holds
// addr.
func smapsOf(smaps []byte, addr uintptr) (size, rss int, ok bool) {
	in := false
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, isRange := strings.Cut(f[0], "-"); isRange && len(f) >= 5 {
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uintptr(s) <= addr && addr < uintptr(e)
			ok = ok || in
			continue
		}
		if !in || len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Size:":
			size, _ = strconv.Atoi(f[1])
		case "Rss:":
			rss, _ = strconv.Atoi(f[1])
		}
	}
	return size, rss, ok
}

// Wait returns in a process that is not the daemon (a test's): init
// mapped nothing of the program there, and said so.
func TestWaitReturnsWhereNothingIsMapped(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Wait()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return in a process that maps nothing")
	}
}
