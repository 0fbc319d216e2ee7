package docker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth"
)

// A session home inside a hidden directory inside the workspace is
// reached through a cover of the provider's, which Close removes.
func TestCoverRemovedWithTheContainer(t *testing.T) {
	p := newProvider(t, Options{})
	ws, _ := testDirs(t)
	daemon := filepath.Join(ws, ".berth")
	home := filepath.Join(daemon, "sessions", "ses_x", "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	sb := openSandbox(t, p, berth.SandboxConfig{Workspace: ws, Home: home, Hide: []string{daemon}})
	if sb.cov == nil {
		t.Fatal("no cover was made")
	}
	if r := run(t, sb, nil, "/bin/sh", "-c", `echo in-home > "$HOME/f"`); !r.status.Success() {
		t.Fatalf("the home is not usable: %+v %q", r.status, r.stderr)
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sb.cov.dir); !os.IsNotExist(err) {
		t.Errorf("the cover is left on the host after Close: %v", err)
	}
}
