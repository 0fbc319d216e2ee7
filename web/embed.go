// Package web holds berth's web UI (docs/api.md, "Web UI"): plain HTML, CSS and
// ES modules, embedded in the binary. There is no build step: what is in
// static/ is what the browser gets.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS is the UI's files: index.html, style.css and js/*.js at its root.
var FS fs.FS = mustSub(static, "static")

// mustSub returns the subtree dir of f; the directory is embedded, so it is
// always there.
func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}
