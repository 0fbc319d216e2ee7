package boxutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir("host", "workspace", dir); err != nil {
		t.Fatalf("a directory: %v", err)
	}
	for path, want := range map[string]string{
		"relative":                 "must be an absolute path",
		filepath.Join(dir, "nope"): "does not exist",
		file:                       "is not a directory",
	} {
		err := CheckDir("host", "workspace", path)
		if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(berth.ErrorMessage(err), "host: the workspace "+want) || strings.Contains(berth.ErrorMessage(err), dir) {
			t.Fatalf("%s: %v, want %q without the path", path, err, want)
		}
	}
}

func TestEnvValue(t *testing.T) {
	env := []string{"A=1", "PATH=/bin:/usr/bin", "B="}
	if EnvValue(env, "PATH") != "/bin:/usr/bin" || EnvValue(env, "B") != "" || EnvValue(env, "C") != "" {
		t.Fatal("EnvValue")
	}
}
