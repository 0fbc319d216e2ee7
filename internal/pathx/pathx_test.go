package pathx

import "testing"

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		base, path string
		want       bool
	}{
		{"/a", "/a", true},
		{"/a", "/a/b", true},
		{"/a/", "/a/b/../c", true},
		{"/", "/x", true},
		{"/a", "/ab", false},
		{"/a", "/a/../b", false},
		{"/a/b", "/a", false},
		{"/a", "/a/..x", true},
	} {
		if got := Within(c.base, c.path); got != c.want {
			t.Errorf("Within(%q, %q) = %v, want %v", c.base, c.path, got, c.want)
		}
	}
}
