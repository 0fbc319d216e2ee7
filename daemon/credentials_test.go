package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
)

// A PostgreSQL store is not opened with a key file others may read: the
// daemon refuses to start, saying how to fix it, before it connects.
func TestOpenStoreRefusesAnOpenKeyFile(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	// Port 1 answers nothing: an error about the key came first.
	_, err := openStore(context.Background(), t.TempDir(), config.Store{URL: "postgres://u@127.0.0.1:1/x?sslmode=disable"},
		config.Credentials{KeyFile: key}, false, slog.New(slog.DiscardHandler))
	if berth.ErrorCode(err) != berth.EUnavailable || !strings.Contains(berth.ErrorMessage(err), "chmod 600") {
		t.Fatalf("open with a 0644 key file: %v", err)
	}
}

// No sandbox sees the credentials file of a SQLite store outside the home,
// nor the key file.
func TestDaemonFilesHideCredentials(t *testing.T) {
	got := daemonFiles("", "sqlite:/srv/berth/state.db", "/etc/berth/key")
	for _, want := range []string{"/srv/berth/state.db", "/srv/berth/state.credentials.json", "/etc/berth/key"} {
		if !slices.Contains(got, want) {
			t.Errorf("hidden files %v lack %s", got, want)
		}
	}
}
