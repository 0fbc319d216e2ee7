package boxutil

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/berth-sh/berth/internal/testenv"
)

// BenchmarkChownTree walks a workspace of 20,000 files in 200 directories
// that the sandbox's uid owns already, as at every start after the first.
func BenchmarkChownTree(b *testing.B) {
	testenv.NeedRoot(b, "chown needs root")
	const id = 123456
	dir := b.TempDir()
	for i := range 200 {
		sub := filepath.Join(dir, "d"+strconv.Itoa(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 100 {
			if err := os.WriteFile(filepath.Join(sub, strconv.Itoa(j)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := ChownTree(dir, id, id, false, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := ChownTree(dir, id, id, true, nil); err != nil {
			b.Fatal(err)
		}
	}
}
