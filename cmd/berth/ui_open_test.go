package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The browser is opened on a private page, never with the one-time
// address in its arguments (which every local user can read in /proc).
func TestOpenBrowserKeepsTheCodeOutOfArguments(t *testing.T) {
	bin, home := t.TempDir(), t.TempDir()
	argsFile := filepath.Join(t.TempDir(), "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\n"
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("DISPLAY", ":0")
	const url = "http://127.0.0.1:7380/login#code=SECRETCODE"
	openBrowser(context.Background(), home, url)
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatalf("xdg-open did not run: %v", err)
	}
	if strings.Contains(string(args), "SECRETCODE") {
		t.Fatalf("the code is in xdg-open's arguments: %q", args)
	}
	page := strings.TrimSpace(string(args))
	fi, err := os.Stat(page)
	if err != nil {
		t.Fatalf("xdg-open was not given the sign-in page: %q (%v)", page, err)
	}
	if fi.Mode().Perm() != 0o600 || filepath.Dir(page) != filepath.Join(home, "ui") {
		t.Errorf("sign-in page %s has mode %v", page, fi.Mode().Perm())
	}
	if di, err := os.Stat(filepath.Dir(page)); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("sign-in page directory: %v %v", di.Mode(), err)
	}
	b, _ := os.ReadFile(page)
	if !strings.Contains(string(b), "url="+url) {
		t.Errorf("the page does not send the browser on: %s", b)
	}
}
