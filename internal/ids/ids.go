// Package ids makes the prefixed, time-ordered identifiers berth hands out
// (ses_…, turn_…, perm_…): a ULID in lower case behind a short prefix, so
// ids sort by creation time and say what they name. It also says which
// ids are safe to name a file by, for the stores that keep a file or a
// directory per id (checkpoints, snapshots).
package ids

import (
	"strings"

	"github.com/oklog/ulid/v2"
)

// New returns prefix + "_" + a new lower-case ULID.
func New(prefix string) string {
	return prefix + "_" + strings.ToLower(ulid.Make().String())
}

// Valid reports whether id has the shape New(prefix) gives: prefix, "_",
// then 26 digits and lower-case letters. Such an id is safe as a file
// name.
func Valid(prefix, id string) bool {
	rest, ok := strings.CutPrefix(id, prefix+"_")
	if !ok || len(rest) != 26 {
		return false
	}
	for _, c := range rest {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// ValidName reports whether id can name a file or directory of its own:
// 1 to 128 letters, digits, '_', '-' or '.', not starting with '.' (so
// never ".", ".." or a hidden name).
func ValidName(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
