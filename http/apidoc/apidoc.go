// Package apidoc holds the OpenAPI 3.1 description of berth's HTTP API
// (openapi.json, kept by hand beside the routes it describes): the server
// serves it at GET /v1/openapi.json, and tests hold the routes and every
// answer to it.
package apidoc

import (
	_ "embed"
	"slices"
)

//go:embed openapi.json
var doc []byte

// JSON returns the document.
func JSON() []byte { return slices.Clone(doc) }
