package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// A daemon that is not root runs its containers as itself: its 0700
// workspace and HOME are the agent's without a chown (it could make none),
// and other users are held out as from the daemon's own files. Before,
// the agent ran as uid 1000 and could write neither. Run as root, the test
// runs again as a uid of no account, through a relay to the engine.
func TestNonRootDaemon(t *testing.T) {
	needEngine(t)
	if os.Geteuid() == 0 {
		runNonRoot(t, engineHost)
		return
	}
	p := newProvider(t, Options{})
	ws, home := t.TempDir(), t.TempDir()
	sb := openSandbox(t, p, berth.SandboxConfig{Workspace: ws, Home: home})
	res := run(t, sb, nil, "sh", "-c", `id -u && id -g && echo w > f && mkdir d && echo h > "$HOME/h" && echo ok`)
	if want := fmt.Sprintf("%d\n%d\nok\n", os.Geteuid(), os.Getegid()); res.stdout != want {
		t.Fatalf("in the sandbox: %+v, want stdout %q", res, want)
	}
	for _, path := range []string{filepath.Join(ws, "f"), filepath.Join(ws, "d"), filepath.Join(home, "h")} {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
			t.Errorf("%s belongs to %d:%d, not the daemon's user", path, st.Uid, st.Gid)
		}
	}
	if uid, gid, ok := p.FileOwner(); ok {
		t.Errorf("FileOwner = %d:%d, true: a daemon that is not root gives no files away", uid, gid)
	}
}

// runNonRoot runs TestNonRootDaemon again as a uid of no account, on the
// engine at host through a relay the uid may use.
func runNonRoot(t *testing.T, host string) {
	t.Helper()
	uid := freeUID(t, 42420)
	tmp := testenv.ShortTempDir(t, "berth-docker-nonroot-")
	if err := os.Chown(tmp, uid, uid); err != nil {
		t.Fatal(err)
	}
	env := []string{"BERTH_TEST_DOCKER_HOST=" + engineProxy(t, host), "TMPDIR=" + tmp, "PATH=" + os.Getenv("PATH")}
	out, err := runAs(t, uid, uid, env, "-test.run=^TestNonRootDaemon$", "-test.count=1", "-test.v")
	if err != nil {
		t.Fatalf("as uid %d: %v", uid, err)
	}
	if !strings.Contains(out, "--- PASS: TestNonRootDaemon") {
		t.Fatalf("as uid %d the test did not pass:\n%s", uid, out)
	}
}
