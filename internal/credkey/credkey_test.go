package credkey

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// Generate makes a 0600 key that Read reads back, and never replaces one.
func TestGenerateRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := Generate(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != Size {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	key, err := Read(path)
	raw, _ := os.ReadFile(path)
	if err != nil || !bytes.Equal(key, raw) {
		t.Fatalf("read: %x, %v", key, err)
	}
	if err := Generate(path); berth.ErrorCode(err) != berth.EConflict {
		t.Fatalf("a second keygen: %v", err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, raw) {
		t.Fatal("a second keygen replaced the key")
	}
}

// Read takes raw bytes, hex and base64, and refuses anything else, a file
// others may read, a symlink and a missing file, saying what to do.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	key := bytes.Repeat([]byte{0xab, 0x01}, Size/2)
	for name, body := range map[string][]byte{
		"raw": key, "hex": []byte(hex.EncodeToString(key) + "\n"), "b64": []byte(base64.StdEncoding.EncodeToString(key)),
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, body, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := Read(p); err != nil || !bytes.Equal(got, key) {
			t.Errorf("%s: %x, %v", name, got, err)
		}
	}
	refused := map[string]string{}
	for name, body := range map[string][]byte{"short": key[:31], "long": append(key, 'x'), "text": []byte("correct horse battery staple")} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, body, 0o600); err != nil {
			t.Fatal(err)
		}
		refused[p] = "not a key"
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	refused[open] = "chmod 600"
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "raw"), link); err != nil {
		t.Fatal(err)
	}
	refused[link] = "cannot open"
	refused[filepath.Join(dir, "missing")] = "berth credentials keygen"
	for p, want := range refused {
		got, err := Read(p)
		if berth.ErrorCode(err) != berth.EUnavailable || !strings.Contains(berth.ErrorMessage(err), want) || got != nil {
			t.Errorf("%s: %x, %v; want unavailable saying %q", filepath.Base(p), got, err, want)
		}
	}
}
