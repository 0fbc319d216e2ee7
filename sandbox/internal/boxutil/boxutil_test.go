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

// Environ puts the process's entries over the sandbox's, sorted, and
// refuses what exec could not pass on.
func TestEnviron(t *testing.T) {
	env, err := Environ("host", map[string]string{"B": "sandbox", "A": "1"}, []string{"B=process", "C=x=y", "D="})
	if err != nil || strings.Join(env, " ") != "A=1 B=process C=x=y D=" {
		t.Fatalf("Environ = %q, %v", env, err)
	}
	if env, err := Environ("host", map[string]string{}, nil); err != nil || env == nil {
		t.Fatalf("an empty environment: %#v, %v; want an empty list", env, err)
	}
	for _, extra := range []string{"NOEQUALS", "=v", "A=b\x00c", "A\x00B=c"} {
		_, err := Environ("bwrap", map[string]string{}, []string{extra})
		if !berth.IsCode(err, berth.EInvalid) || !strings.HasPrefix(berth.ErrorMessage(err), "bwrap: ") {
			t.Errorf("%q: %v, want invalid_argument from bwrap", extra, err)
		}
	}
}
