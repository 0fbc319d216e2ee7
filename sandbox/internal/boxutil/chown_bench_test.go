package boxutil

import (
	"testing"

	"github.com/berth-sh/berth/internal/testenv"
)

// BenchmarkChownTree walks a workspace of 20,000 files in 200 directories
// that the sandbox's uid owns already, as at every start after the first.
func BenchmarkChownTree(b *testing.B) {
	testenv.NeedRoot(b, "chown needs root")
	const id = 123456
	dir := b.TempDir()
	testenv.FillTree(b, dir, 200, 100)
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
