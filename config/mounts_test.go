package config

import (
	"fmt"
	"testing"

	"github.com/berth-sh/berth"
)

// [[sandbox.mounts]] load into the allow-list the manager gets; a mount
// with a missing host, a relative or system target, a bad or repeated
// name is refused at load, naming the entry.
func TestSandboxMounts(t *testing.T) {
	cache := t.TempDir()
	c, err := Load(writeFile(t, fmt.Sprintf("[[sandbox.mounts]]\nname = \"gomod\"\nhost = %q\ntarget = \"/cache/gomod\"\n", cache)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Sandbox.MountList(); len(got) != 1 || got[0] != (berth.Mount{Name: "gomod", Host: cache, Target: "/cache/gomod"}) {
		t.Fatalf("mounts = %+v", got)
	}
	entry := func(name, host, target string) string {
		return fmt.Sprintf("[[sandbox.mounts]]\nname = %q\nhost = %q\ntarget = %q\n", name, host, target)
	}
	for _, tc := range []struct{ body, want string }{
		{entry("m", cache+"/missing", "/cache"), "does not exist"},
		{entry("m", "rel", "/cache"), "absolute"},
		{entry("m", cache, "cache"), "absolute"},
		{entry("m", cache, "/cache/../etc"), "clean"},
		{entry("m", cache, "/"), "other than /"},
		{entry("m", cache, "/usr/share/x"), "/usr"},
		{entry("m", cache, "/etc"), "/etc"},
		{entry("m", cache, "/var"), "/var/tmp"},
		{entry("m", cache, "/tmp/cache"), "/tmp"},
		{entry("bad name", cache, "/cache"), "name"},
		{entry("", cache, "/cache"), "name"},
		{entry("m", cache, "/a") + entry("m", cache, "/b"), "another mount's"},
		{entry("m", cache, "/a") + entry("n", cache, "/a"), "another mount's"},
	} {
		_, err := Load(writeFile(t, tc.body), nil)
		wantInvalid(t, err, "sandbox.mounts[", tc.want)
	}
}
