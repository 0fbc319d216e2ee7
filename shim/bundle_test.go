package shim

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBundleLayout checks the run-directory layout in one place: the names
// of a shim's files, the scan that finds them again (with sockets left
// alone), and what Remove keeps.
func TestBundleLayout(t *testing.T) {
	dir := t.TempDir()
	b := NewBundle(dir, "ses_a", "0011")
	want := Bundle{Socket: filepath.Join(dir, "0011.sock"), Spool: filepath.Join(dir, "ses_a.0011.spool"),
		Log: filepath.Join(dir, "ses_a.0011.log"), PIDFile: filepath.Join(dir, "ses_a.0011.pid")}
	if b != want {
		t.Fatalf("NewBundle = %+v, want %+v", b, want)
	}
	if got := BundleOf(b.Socket, "ses_a"); got != b {
		t.Fatalf("BundleOf = %+v, want %+v", got, b)
	}
	spool, ln, err := b.create()
	if err != nil {
		t.Fatal(err)
	}
	_ = spool.Close()
	defer ln.Close()
	if err := os.WriteFile(b.Log, []byte("why it failed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, "ffee.sock")
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	bundles, strays := ScanRunDir(dir)
	if len(bundles) != 1 || bundles[b] != "ses_a" {
		t.Errorf("bundles = %v, want %v of ses_a", bundles, b)
	}
	if len(strays) != 1 || strays[0] != (Bundle{Socket: stray}) {
		t.Errorf("strays = %v, want the socket %s alone", strays, stray)
	}

	b.Remove(true)
	for _, f := range []string{b.Socket, b.Spool, b.PIDFile} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", f, err)
		}
	}
	if _, err := os.Stat(b.Log); err != nil {
		t.Errorf("a log that says something is kept: %v", err)
	}
	b.Remove(false)
	if _, err := os.Stat(b.Log); !os.IsNotExist(err) {
		t.Errorf("log not removed: %v", err)
	}
}
