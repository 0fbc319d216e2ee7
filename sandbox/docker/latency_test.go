package docker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
)

// TestLatency measures create→first exec answered: Open, then Start of
// `true` and its Wait, over 10 sandboxes, and logs the median of each step
// (go test -v -run TestLatency). Speed is not asserted here (berth bench
// measures it): the test fails only when a step fails.
func TestLatency(t *testing.T) {
	p := newProvider(t, Options{})
	ctx := t.Context()
	// Warm up: the image build and the first container are not the case.
	warm := openSandbox(t, p, berth.SandboxConfig{})
	run(t, warm, nil, "true")

	const runs = 10
	var open, start, wait, total, closing []time.Duration
	for range runs {
		ws, home := testDirs(t)
		t0 := time.Now()
		sb, err := p.Open(ctx, berth.SandboxConfig{SessionID: "ses_lat", Workspace: ws, Home: home})
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		proc, err := sb.Start(ctx, berth.ProcSpec{Path: "true"})
		if err != nil {
			t.Fatal(err)
		}
		t2 := time.Now()
		go drain(proc.Stdout())
		go drain(proc.Stderr())
		if st, err := proc.Wait(); err != nil || !st.Success() {
			t.Fatalf("true: %+v, %v", st, err)
		}
		t3 := time.Now()
		if err := sb.Close(ctx); err != nil {
			t.Fatal(err)
		}
		t4 := time.Now()
		open, start, wait, total, closing = append(open, t1.Sub(t0)), append(start, t2.Sub(t1)), append(wait, t3.Sub(t2)),
			append(total, t3.Sub(t0)), append(closing, t4.Sub(t3))
	}
	// The engine's own steps, without berth: create, start, exec create,
	// exec start (attached) to the end of its stream.
	var create, cstart, exec []time.Duration
	who, err := p.identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range runs {
		cc, hc := p.containerSpec(berth.SandboxConfig{Workspace: t.TempDir()}, p.opts.Image, who, nil)
		var c client.ContainerCreateResult
		var t0, t1, t2 time.Time
		// A start the runtime failed is made again, as Open does
		// (runtimeStartFailed); the timing is the one that started.
		for attempt := 1; ; attempt++ {
			t0 = time.Now()
			c, err = p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cc, HostConfig: hc})
			if err != nil {
				t.Fatal(err)
			}
			t1 = time.Now()
			_, err = p.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
			t2 = time.Now()
			if err == nil {
				break
			}
			_, _ = p.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
			if attempt >= startAttempts || !runtimeStartFailed(err) {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(attempt*attempt) * 100 * time.Millisecond)
		}
		e, err := p.cli.ExecCreate(ctx, c.ID, client.ExecCreateOptions{Cmd: []string{"true"}, AttachStdout: true})
		if err != nil {
			t.Fatal(err)
		}
		att, err := p.cli.ExecAttach(ctx, e.ID, client.ExecAttachOptions{})
		if err != nil {
			t.Fatal(err)
		}
		drain(att.Reader)
		att.Close()
		t3 := time.Now()
		_, _ = p.cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
		create, cstart, exec = append(create, t1.Sub(t0)), append(cstart, t2.Sub(t1)), append(exec, t3.Sub(t2))
	}
	t.Logf("berth, median of %d: Open %v + Start(true) %v + Wait %v = %v (Close %v)",
		runs, median(open), median(start), median(wait), median(total), median(closing))
	t.Logf("engine alone, median of %d: create %v, start %v, exec to end of stream %v",
		runs, median(create), median(cstart), median(exec))
}

// median is the middle of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond / 10)
}
