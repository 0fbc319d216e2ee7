package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A database file shorter than its header says is not refused while a WAL
// beside it holds what a killed checkpoint had not yet written back.
func TestAShortFileWithAWALIsLeftToSQLite(t *testing.T) {
	home := t.TempDir()
	db := filepath.Join(home, "berth.db")
	hdr := make([]byte, 4096)
	copy(hdr, sqliteMagic)
	hdr[16], hdr[17] = 0x10, 0x00 // page size 4096
	hdr[31] = 3                   // 3 pages, but the file holds 1
	hdr[27], hdr[95] = 1, 1       // change counter = version-valid-for
	if err := os.WriteFile(db, hdr, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkSQLiteFile(db, home, false); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("without a WAL: %v, want truncated", err)
	}
	if err := os.WriteFile(db+"-wal", []byte("frames"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkSQLiteFile(db, home, false); err != nil {
		t.Fatalf("with a WAL: %v", err)
	}
}
