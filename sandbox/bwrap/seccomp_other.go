//go:build !amd64 && !arm64

package bwrap

// auditArch is 0 where the filter's tables are not written: sandboxes
// run without it.
const auditArch = 0

// modeRules is empty where the filter's tables are not written.
var modeRules []modeRule
