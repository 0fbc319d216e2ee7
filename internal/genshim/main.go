// Command genshim builds the small shim program (cmd/berth-shim) into the
// directory the berth binary embeds, so that berth carries it: `go
// generate ./cmd/berth` runs it before berth is built.
//
// The shim is built static (CGO_ENABLED=0: no C library mapped into a
// thousand processes), without paths of this machine (-trimpath) or debug
// symbols (-s -w), for the GOOS/GOARCH berth is built for. The file is
// written whole or not at all (a temp file renamed), its hash beside it.
//
// Usage: go run ./internal/genshim -o FILE
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

func main() {
	out := flag.String("o", "", "the file to write the built shim to")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: genshim -o FILE")
		os.Exit(2)
	}
	if err := build(*out); err != nil {
		fmt.Fprintln(os.Stderr, "genshim:", err)
		os.Exit(1)
	}
}

// build builds cmd/berth-shim to out, and its SHA-256 (hex) to
// out.sha256: berth names and checks the shim by it without reading the
// embedded program.
func build(out string) error {
	tmp := out + ".tmp"
	defer os.Remove(tmp)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, "github.com/berth-sh/berth/cmd/berth-shim")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build cmd/berth-shim: %w", err)
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if err := os.WriteFile(tmp+".sha256", []byte(hex.EncodeToString(sum[:])+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(tmp + ".sha256")
	// The program first: a hash without its program is never left.
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	if err := os.Rename(tmp+".sha256", out+".sha256"); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "genshim: wrote %s (%d bytes)\n", filepath.Clean(out), len(b))
	return nil
}
