package bwrap

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// Twenty sandboxes with network start at once, and each runs its program:
// slirp4netns joins each namespace through a pinned descriptor (never the
// pid, whose user namespace bwrap nests) and only once bwrap has set the
// loopback up (the two configuring at once made bwrap fail now and then).
func TestNetworkManyAtOnce(t *testing.T) {
	if slirpPath() == "" {
		testenv.Missing(t, "slirp4netns", "not installed (Debian package slirp4netns)")
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		sb, _ := open(t, func(c *berth.SandboxConfig) { c.Network = true })
		wg.Go(func() {
			var out, errOut strings.Builder
			p, err := sb.Start(context.Background(), berth.ProcSpec{Path: "/.berth/busybox", Args: []string{"true"}, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
			if err != nil {
				t.Errorf("start: %v", err)
				return
			}
			st, _ := p.Wait()
			if !st.Success() {
				t.Errorf("the program failed: %v %s", st, errOut.String())
			}
		})
	}
	wg.Wait()
}
