// Command genshim builds the small shim program (cmd/berth-shim) into the
// directory the berth binary embeds, so that berth carries it: `go
// generate ./cmd/berth` runs it before berth is built.
//
// The shim is built static (CGO_ENABLED=0: no C library mapped into a
// thousand processes), without paths of this machine (-trimpath) or debug
// symbols (-s -w), for the GOOS/GOARCH berth is built for. The file is
// written whole or not at all (a temp file renamed).
//
// Usage: go run ./internal/genshim -o FILE
package main

import (
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

// build builds cmd/berth-shim to out.
func build(out string) error {
	tmp := out + ".tmp"
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, "github.com/berth-sh/berth/cmd/berth-shim")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("go build cmd/berth-shim: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	fmt.Fprintf(os.Stderr, "genshim: wrote %s\n", filepath.Clean(out))
	return nil
}
