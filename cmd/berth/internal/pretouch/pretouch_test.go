package pretouch

import (
	"os"
	"syscall"
	"testing"
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
