package objstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/testenv"
)

// writeSmallFiles makes n files of 1–8 KiB of random bytes under dir,
// spread over about n/33 directories two levels deep (a workspace's
// shape), the same for the same seed.
func writeSmallFiles(tb testing.TB, dir string, n int, seed uint64) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	dirs := max(n/33, 1)
	buf := make([]byte, 8<<10)
	for i := range n {
		d := i % dirs
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", d%10), fmt.Sprintf("mod%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			tb.Fatal(err)
		}
		size := 1<<10 + rng.IntN(7<<10+1)
		for j := range size {
			buf[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.txt", i)), buf[:size], 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkRestore10k restores a workspace of 10,000 files of 1–8 KiB in
// some 300 directories from the test S3 server. It reports too the first
// upload's and an unchanged second one's time (tree_first_s,
// tree_again_s), the objects and bytes the first put and the objects the
// second did, and how long writing the same files takes on this disk
// without a store (write_s, the floor of a restore). Each run sets up
// its own tree: go test -run '^$' -bench Restore10k -benchtime 1x
// -count 5 ./objstore, with the test S3 server (scripts/test starts one).
func BenchmarkRestore10k(b *testing.B) {
	c := openTest(b)
	ctx := testenv.Context(b)
	src := b.TempDir()
	start := time.Now()
	writeSmallFiles(b, src, 10_000, 1)
	write := time.Since(start)

	u := NewUploader(c, "")
	start = time.Now()
	tree, prev, err := u.Tree(ctx, src, checkpoint.Options{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	puts, bytes := u.Puts(), u.PutBytes()
	// A second write of the unchanged tree, by the same Uploader.
	start = time.Now()
	if _, _, err := u.Tree(ctx, src, checkpoint.Options{}, nil, prev); err != nil {
		b.Fatal(err)
	}
	again := time.Since(start)
	if err := c.putJSON(ctx, StateKey("ses_bench"), State{V: StateVersion, SessionID: "ses_bench", Workspace: tree}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dst := filepath.Join(b.TempDir(), "ws")
		if err := os.Mkdir(dst, 0o755); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Restore(ctx, c, "ses_bench", dst, "", RestoreOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// After the loop: ResetTimer drops the metrics reported before it.
	b.ReportMetric(first.Seconds(), "tree_first_s")
	b.ReportMetric(again.Seconds(), "tree_again_s")
	b.ReportMetric(float64(puts), "objects_put")
	b.ReportMetric(float64(bytes)/(1<<20), "MiB_put")
	b.ReportMetric(float64(u.Puts()-puts), "objects_put_again")
	b.ReportMetric(write.Seconds(), "write_s")
}

// BenchmarkSyncTurns writes, after a first write of a 1,000-file
// workspace, sessions whose turns each wrote one file and took a
// checkpoint: 50 turns a write (a second of back-to-back demo turns).
// ns/op is one such write.
func BenchmarkSyncTurns(b *testing.B) {
	c := openTest(b)
	ctx := testenv.Context(b)
	ws := b.TempDir()
	writeSmallFiles(b, ws, 1_000, 2)
	cs := checkpoint.New(b.TempDir(), checkpoint.Options{})
	synced := make(chan int64, 1)
	seq := int64(0)
	s := NewSyncer(SyncerOptions{Uploader: NewUploader(c, ""), Checkpoints: cs, Delay: time.Millisecond,
		Resolve: func(context.Context, string, string) (Target, error) { return Target{Seq: seq, Workspace: ws}, nil },
		Synced:  func(_ context.Context, _ string, seq int64, _ time.Time) error { synced <- seq; return nil },
	})
	defer s.Close(context.Background())
	turn := func(n int) {
		for range n {
			seq++
			if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("turn-%d.txt", seq)), []byte(fmt.Sprint(seq)), 0o644); err != nil {
				b.Fatal(err)
			}
			if _, err := cs.Create(ctx, "ses_t", fmt.Sprintf("turn_%d", seq), ws); err != nil {
				b.Fatal(err)
			}
		}
		s.TurnEnded("ses_t", "turn")
		for got := int64(0); got != seq; {
			got = <-synced
		}
	}
	turn(1)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for range 50 {
			seq++
			if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("turn-%d.txt", seq)), []byte(fmt.Sprint(seq)), 0o644); err != nil {
				b.Fatal(err)
			}
			if _, err := cs.Create(ctx, "ses_t", fmt.Sprintf("turn_%d", seq), ws); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		turn(0)
	}
}
