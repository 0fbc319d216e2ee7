//go:build !amd64 && !arm64

package bwrap

// auditArch is 0 where the filter's tables are not written: sandboxes
// run without it.
const auditArch = 0

// hasX32 is unused where the filter's tables are not written.
const hasX32 = false

// modeRules is empty where the filter's tables are not written.
var modeRules []modeRule

// deniedArch is empty where the filter's tables are not written.
var deniedArch []denied

// deniedCommon is empty where the filter's tables are not written.
var deniedCommon []denied
