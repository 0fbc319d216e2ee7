package main

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are packages the small shim must not link: each adds to every
// shim's memory what only the daemon or the CLI needs.
var heavy = []string{
	"github.com/spf13/",              // the CLI
	"modernc.org/",                   // SQLite
	"github.com/jackc/",              // PostgreSQL
	"github.com/docker/",             // the Docker API client (docker sessions run `berth shim`)
	"github.com/moby/",               //
	"golang.org/x/text/",             //
	"net/http",                       // the API
	"crypto/tls",                     //
	"html/template",                  //
	"github.com/berth-sh/berth/http", //
	"github.com/berth-sh/berth/session",
	"github.com/berth-sh/berth/store",
	"github.com/berth-sh/berth/eventlog",
	"github.com/berth-sh/berth/config",
	"github.com/berth-sh/berth/sandbox/docker",
}

// The small shim links only what a shim needs: a heavy package creeping
// into its dependencies (through shim, shimcmd or a provider) fails here.
func TestTheSmallShimLinksNoHeavyPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), out)
	}
	for _, d := range deps {
		for _, h := range heavy {
			if d == h || strings.HasPrefix(d, h) && (strings.HasSuffix(h, "/") || strings.HasPrefix(d[len(h):], "/")) {
				t.Errorf("berth-shim depends on %s", d)
			}
		}
	}
}
