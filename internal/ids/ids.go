// Package ids makes the prefixed, time-ordered identifiers berth hands out
// (ses_…, turn_…, perm_…): a ULID in lower case behind a short prefix, so
// ids sort by creation time and say what they name.
package ids

import (
	"strings"

	"github.com/oklog/ulid/v2"
)

// New returns prefix + "_" + a new lower-case ULID.
func New(prefix string) string {
	return prefix + "_" + strings.ToLower(ulid.Make().String())
}
