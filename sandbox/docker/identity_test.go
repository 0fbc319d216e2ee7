package docker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/api/types/system"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// Who a sandbox is, by daemon and engine: a root daemon's containers run
// as host_uid (no login account) on a plain engine and as [sandbox] uid
// mapped to the engine's subordinate ids on one that remaps; a non-root
// daemon's as itself, in the host's user namespace on one that remaps; a
// rootless engine is refused (its only id that is the daemon's user is
// root).
func TestChooseIdentity(t *testing.T) {
	opts := Options{UID: 1000, GID: 1001, HostUID: 88888}
	plain := system.Info{SecurityOptions: []string{"name=seccomp,profile=builtin"}, DockerRootDir: "/var/lib/docker"}
	remap := system.Info{SecurityOptions: []string{"name=seccomp,profile=builtin", "name=userns"}, DockerRootDir: "/var/lib/docker/231072.231073"}
	for _, c := range []struct {
		name       string
		info       system.Info
		euid, egid int
		want       identity
	}{
		{"root, plain engine", plain, 0, 0, identity{uid: 88888, gid: 88888, hostUID: 88888, hostGID: 88888, give: true}},
		{"root, remapping engine", remap, 0, 0, identity{uid: 1000, gid: 1001, hostUID: 232072, hostGID: 232074, give: true}},
		{"non-root, plain engine", plain, 1234, 1235, identity{uid: 1234, gid: 1235, hostUID: 1234, hostGID: 1235}},
		{"non-root, remapping engine", remap, 1234, 1235, identity{uid: 1234, gid: 1235, hostUID: 1234, hostGID: 1235, hostNS: true}},
	} {
		got, err := chooseIdentity(c.info, c.euid, c.egid, opts)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	rootless := system.Info{SecurityOptions: []string{"name=seccomp,profile=builtin", "name=rootless", "name=cgroupns"}}
	for _, euid := range []int{0, 1234} {
		if got, err := chooseIdentity(rootless, euid, euid, opts); !berth.IsCode(err, berth.EUnavailable) {
			t.Errorf("rootless engine, euid %d: %+v, %v; want unavailable", euid, got, err)
		}
	}
	for _, dir := range []string{"/var/lib/docker", "/var/lib/docker/0.0", "/x/1.y", ""} {
		bad := system.Info{SecurityOptions: []string{"name=userns"}, DockerRootDir: dir}
		if got, err := chooseIdentity(bad, 0, 0, opts); !berth.IsCode(err, berth.EUnavailable) {
			t.Errorf("remapping engine with data root %q: %+v, %v; want unavailable", dir, got, err)
		}
	}
}

// The provider's default host uid is bwrap's: one uid, no login account,
// owns every root daemon's sandbox files.
func TestDefaultHostUIDIsBwraps(t *testing.T) {
	if DefaultHostUID != bwrap.DefaultHostUID {
		t.Fatalf("docker's DefaultHostUID %d, bwrap's %d", DefaultHostUID, bwrap.DefaultHostUID)
	}
}

func TestMappedID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "uid_map")
	if err := os.WriteFile(path, []byte("         0     231072      65536\n     65536    1000000         10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int]int{0: 231072, 1000: 232072, 65535: 296607, 65536: 1000000, 65545: 1000009, 65546: -1} {
		if got, err := mappedID(path, id); err != nil || got != want {
			t.Errorf("mappedID(%d) = %d, %v; want %d", id, got, err, want)
		}
	}
	if err := os.WriteFile(path, []byte("0 x 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mappedID(path, 0); err == nil {
		t.Error("a bad line was read")
	}
}
