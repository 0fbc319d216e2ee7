package docker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// On an engine that remaps user namespaces (dockerd --userns-remap), a
// root daemon's containers run as [sandbox] uid (1000) inside, which the
// engine maps to its subordinate ids: the daemon gives the files to that
// host uid (FileOwner says it), the agent writes its workspace and HOME,
// and uid 1000 of the host — a login account — gets nowhere. A daemon
// that is not root runs in the host's user namespace, as itself.
func TestUsernsRemap(t *testing.T) {
	testenv.NeedRoot(t, "a throwaway engine that remaps user namespaces")
	needEngine(t)
	for _, tool := range []string{"useradd", "usermod", "userdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "the remapped engine's user is made with it (Debian package passwd)")
		}
	}
	name, base := remapUser(t)
	eng, err := startEngine("--userns-remap=" + name)
	if err != nil {
		t.Fatalf("the remapped dockerd: %v", err)
	}
	t.Cleanup(eng.stop)
	p, err := New(Options{Host: eng.host, Image: testImage, Instance: testInstance})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	host := base + DefaultUID
	if uid, gid, ok := p.FileOwner(); uid != host || gid != host || !ok {
		t.Fatalf("FileOwner = %d:%d, %v; want %d:%d, true", uid, gid, ok, host, host)
	}

	t.Run("root daemon", func(t *testing.T) {
		ws, home := testDirs(t)
		if err := os.WriteFile(filepath.Join(ws, "root.txt"), []byte("root's\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		sb := openSandbox(t, p, berth.SandboxConfig{Workspace: ws, Home: home})
		res := run(t, sb, nil, "sh", "-c", `id -u && id -un && cat root.txt && echo w > f && echo h > "$HOME/h" && echo ok`)
		if want := fmt.Sprintf("%d\nberth\nroot's\nok\n", DefaultUID); res.stdout != want {
			t.Fatalf("in the sandbox: %+v, want stdout %q", res, want)
		}
		for _, path := range []string{filepath.Join(ws, "f"), filepath.Join(ws, "root.txt"), filepath.Join(home, "h")} {
			var st syscall.Stat_t
			if err := syscall.Stat(path, &st); err != nil {
				t.Fatal(err)
			}
			if int(st.Uid) != host || int(st.Gid) != host {
				t.Errorf("%s belongs to %d:%d, want %d:%d", path, st.Uid, st.Gid, host, host)
			}
		}
	})
	t.Run("login uid 1000", func(t *testing.T) {
		uid, gid := loginUser(t, 1000)
		for name, got := range attackProbes(t, p, uid, gid).got {
			if got == "ok" {
				t.Errorf("as uid %d, %s: it worked", uid, name)
			}
		}
	})
	t.Run("mapped elsewhere", func(t *testing.T) {
		// A provider that takes the engine's mapping for another one:
		// Open sees the container's uid_map and gives nothing away.
		q, err := New(Options{Host: eng.host, Image: testImage, Instance: testInstance})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Close() })
		q.who = &identity{uid: DefaultUID, gid: DefaultUID, hostUID: host + 1, hostGID: host + 1, give: true}
		ws, home := testDirs(t)
		sb, err := q.Open(t.Context(), berth.SandboxConfig{SessionID: "ses_" + randomHex(6), Workspace: ws, Home: home})
		if err == nil {
			_ = sb.Close(context.Background())
			t.Fatal("Open ran a container whose uid maps elsewhere")
		}
		if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("as host uid %d, not %d", host, host+1)) {
			t.Errorf("Open: %v", err)
		}
		for _, dir := range []string{ws, home} {
			var st syscall.Stat_t
			if err := syscall.Stat(dir, &st); err != nil || st.Uid != 0 {
				t.Errorf("%s now belongs to %d (%v)", dir, st.Uid, err)
			}
		}
	})
	t.Run("non-root daemon", func(t *testing.T) { runNonRoot(t, eng.host) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	removeImage(ctx, p, testImage)
}

// remapUser makes a system user with 65536 subordinate uids and gids of
// its own, above every range /etc/subuid and /etc/subgid give, for
// dockerd --userns-remap, deleted (with its ranges) when the test ends. It
// returns its name and the first of its ids.
func remapUser(t *testing.T) (name string, base int) {
	t.Helper()
	base = 1 << 20
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		if end := subIDsEnd(t, f); end > base {
			base = end
		}
	}
	base = (base + 65535) &^ 65535
	name = "berthremap" + randomHex(3)
	ids := fmt.Sprintf("%d-%d", base, base+65535)
	for _, argv := range [][]string{
		{"useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name},
		{"usermod", "--add-subuids", ids, "--add-subgids", ids, name},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
		if argv[0] == "useradd" {
			t.Cleanup(func() {
				if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
					t.Errorf("userdel %s: %v: %s", name, err, out)
				}
			})
		}
	}
	return name, base
}

// subIDsEnd is the first id past every range of the subordinate id file
// path ("name:first:count" lines); 0 when there is none.
func subIDsEnd(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	end := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) != 3 {
			continue
		}
		first, err1 := strconv.Atoi(fields[1])
		count, err2 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil && first+count > end {
			end = first + count
		}
	}
	return end
}
