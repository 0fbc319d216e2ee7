package config

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// fakeNpm puts on PATH an npm that "installs" a package as npm lays one
// out (node_modules/NAME/package.json with its bin) at the version
// FAKE_NPM_VERSION, or fails with FAKE_NPM_FAIL's words.
func fakeNpm(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
# npm install --prefix DIR ... -- PKG
[ -n "$FAKE_NPM_FAIL" ] && { echo "npm error code E404"; echo "$FAKE_NPM_FAIL" >&2; exit 1; }
prefix=$3
for a; do pkg=$a; done
name=${pkg%@*}
[ -z "$name" ] && name=$pkg
mkdir -p "$prefix/node_modules/$name/dist"
printf '{"name":"%s","version":"%s","bin":{"%s":"dist/index.js","other":"dist/other.js"}}' "$name" "$FAKE_NPM_VERSION" "${name##*/}" > "$prefix/node_modules/$name/package.json"
printf '#!/bin/sh\necho agent\n' > "$prefix/node_modules/$name/dist/index.js"
chmod +x "$prefix/node_modules/$name/dist/index.js"
`
	if err := os.WriteFile(filepath.Join(dir, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	t.Setenv("FAKE_NPM_VERSION", "1.2.3")
}

// An npx agent installed into the daemon's prefix runs from there, its
// package's program with the arguments after the package; before, and for
// any other agent, the catalog is as it was.
func TestInstallRunsAnNpxAgentFromThePrefix(t *testing.T) {
	fakeNpm(t)
	cfg := Default()
	cfg.Agents = []berth.AgentSpec{
		{Name: "pinned", Command: "npx", Args: []string{"-y", "@scope/pinned-agent@1.2.3", "--acp"}},
		{Name: "stale", Command: "npx", Args: []string{"-y", "stale-agent@9.9.9"}},
	}
	cat, err := cfg.Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(t.TempDir(), "agents")
	cat.WithPackages(prefix)
	if a, _ := cat.Get("pinned"); a.Command != "npx" {
		t.Fatalf("before the install: %+v", a)
	}
	info, err := cat.Install(context.Background(), "pinned")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(prefix, "node_modules/@scope/pinned-agent/dist/index.js")
	if !info.Installed || info.Fetch || info.Command != bin || !slices.Equal(info.Args, []string{"--acp"}) {
		t.Fatalf("Install = %+v", info)
	}
	if a, _ := cat.Get("pinned"); a.Command != bin || !slices.Equal(a.Args, []string{"--acp"}) {
		t.Fatalf("Get after the install: %+v", a)
	}
	// A pinned version npm did not install is not the agent's package.
	if _, err := cat.Install(context.Background(), "stale"); !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("Install of a version npm did not give: %v", err)
	}
	if a, _ := cat.Get("stale"); a.Command != "npx" {
		t.Fatalf("a stale version runs from the prefix: %+v", a)
	}
	for _, c := range []struct {
		name string
		code string
	}{{"demo", berth.EInvalid}, {"nope", berth.ENotFound}} {
		if _, err := cat.Install(context.Background(), c.name); !berth.IsCode(err, c.code) {
			t.Errorf("Install(%s) = %v, want %s", c.name, err, c.code)
		}
	}
	t.Setenv("FAKE_NPM_FAIL", "404 Not Found - GET https://registry.npmjs.org/@scope%2fpinned-agent")
	if _, err := cat.Install(context.Background(), "pinned"); !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(err.Error(), "404 Not Found") {
		t.Fatalf("a failing npm: %v", err)
	}
}

// A package's bin that leads out of the package is no program of it.
func TestPackageBinStaysInItsPackage(t *testing.T) {
	prefix := t.TempDir()
	pdir := filepath.Join(prefix, "node_modules", "evil")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prefix, "outside"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "package.json"), []byte(`{"version":"1.0.0","bin":"../../outside"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if bin, ok := packageBin(prefix, "evil"); ok {
		t.Fatalf("packageBin = %s", bin)
	}
}
