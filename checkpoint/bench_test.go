package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkCheckpointOneChanged: a checkpoint of 10,000 files after one
// changed (berth bench --checkpoint-files reports the same figure).
func BenchmarkCheckpointOneChanged(b *testing.B) { benchOneChanged(b, false) }

// BenchmarkCheckpointOneChangedCounted is BenchmarkCheckpointOneChanged
// the way the daemon takes it: counted in its tree (the index built at
// boot) and followed by the tree's Prune.
func BenchmarkCheckpointOneChangedCounted(b *testing.B) { benchOneChanged(b, true) }

// benchOneChanged times checkpoints of 10,000 files after one changed,
// counted and pruned or not.
func benchOneChanged(b *testing.B, counted bool) {
	ws := b.TempDir()
	for i := range 10000 {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.go", i))
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, fmt.Appendf(nil, "package d // %d\n", i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	_ = os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("*.o\nbuild/\n"), 0o644)
	s := New(filepath.Join(b.TempDir(), "ckpt"), Options{})
	ctx := context.Background()
	if _, err := s.Create(ctx, "ses_b", "t0", ws); err != nil {
		b.Fatal(err)
	}
	if counted {
		if _, err := s.Sweep(); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		i++
		_ = os.WriteFile(filepath.Join(ws, "d00", "f00000.go"), fmt.Appendf(nil, "v%d", i), 0o644)
		if _, err := s.Create(ctx, "ses_b", "t", ws); err != nil {
			b.Fatal(err)
		}
		if counted {
			if _, err := s.Prune("ses_b", nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCheckpointSmallWorkspace: the checkpoint before a turn in a
// small managed workspace (what every demo turn pays).
func BenchmarkCheckpointSmallWorkspace(b *testing.B) {
	ws := b.TempDir()
	_ = os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a"), 0o644)
	s := New(filepath.Join(b.TempDir(), "ckpt"), Options{})
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Create(ctx, "ses_b", "t", ws); err != nil {
			b.Fatal(err)
		}
	}
}
