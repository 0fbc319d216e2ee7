package ids

import "strings"

// Valid reports whether id is one New(prefix) could have made: prefix,
// "_" and 26 lower-case letters or digits. Such an id is also a safe file
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

// SafeName reports whether id, made by whoever, can name a directory of
// its own: 1 to 128 letters, digits, '_', '-' or '.', not starting with
// '.'.
func SafeName(id string) bool {
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
