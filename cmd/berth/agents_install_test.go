package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `berth agents install NAME` fetches an npx agent's package with npm into
// the daemon's home (an npm that lays the package out as npm does stands
// in for the registry); `berth agents` says so, and a session of the
// agent runs the installed program, without npx.
func TestAgentsInstallFetchesAhead(t *testing.T) {
	npmDir := t.TempDir()
	npm := `#!/bin/sh
prefix=$3
for a; do pkg=$a; done
mkdir -p "$prefix/node_modules/$pkg/bin"
printf '{"name":"%s","version":"1.0.0","bin":{"%s":"bin/agent"}}' "$pkg" "$pkg" > "$prefix/node_modules/$pkg/package.json"
printf '#!/bin/sh\nexec ` + bin + ` agent-demo "$@"\n' > "$prefix/node_modules/$pkg/bin/agent"
chmod 755 "$prefix/node_modules/$pkg/bin/agent"
echo "added 1 package"
`
	if err := os.WriteFile(filepath.Join(npmDir, "npm"), []byte(npm), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cfg := `[[agents]]
name = "from-npm"
command = "npx"
args = ["-y", "berth-test-agent"]
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerEnv(t, home, []string{"PATH=" + npmDir + ":" + os.Getenv("PATH")})
	out, code := s.cliWith(t, "", nil, "agents", "install", "from-npm")
	installed := filepath.Join(home, "agents", "node_modules", "berth-test-agent", "bin", "agent")
	if code != 0 || !strings.Contains(out, "installed berth-test-agent: runs "+installed) {
		t.Fatalf("agents install: %d %s", code, out)
	}
	if out := s.cli(t, "agents"); !strings.Contains(out, "berth-test-agent installed by berth") {
		t.Fatalf("berth agents after the install:\n%s", out)
	}
	sess := s.create(t, map[string]any{"agent": "from-npm", "sandbox": "host"})
	if r := s.turn(t, sess.ID, "hello"); !strings.Contains(r.Text, "hello") {
		t.Fatalf("the installed agent's turn: %+v", r)
	}
	if out, code := s.cliWith(t, "", nil, "agents", "install", "demo"); code == 0 || !strings.Contains(out, "not run by npx") {
		t.Fatalf("agents install of an agent npx does not run: %d %s", code, out)
	}
}
