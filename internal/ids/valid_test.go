package ids

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	cases := map[string]bool{
		New("ckpt"):                        true,
		"ckpt_01hzy3v8q2k9x7m4n5p6r8s0t1":  true,
		"snap_01hzy3v8q2k9x7m4n5p6r8s0t1":  false, // another prefix
		"ckpt_01HZY3V8Q2K9X7M4N5P6R8S0T1":  false, // upper case
		"ckpt_01hzy3v8q2k9x7m4n5p6r8s0t":   false, // short
		"ckpt_01hzy3v8q2k9x7m4n5p6r8s0t12": false, // long
		"ckpt_../../../../../../etc/passw": false,
		"ckpt01hzy3v8q2k9x7m4n5p6r8s0t1x":  false, // no "_"
		"":                                 false,
	}
	for id, want := range cases {
		if got := Valid("ckpt", id); got != want {
			t.Errorf("Valid(ckpt, %q) = %v, want %v", id, got, want)
		}
	}
}

func TestSafeName(t *testing.T) {
	cases := map[string]bool{
		"ses_01hzy3v8q2k9x7m4n5p6r8s0t1": true,
		"A-b_c.d":                        true,
		strings.Repeat("a", 128):         true,
		strings.Repeat("a", 129):         false,
		"":                               false,
		".":                              false,
		"..":                             false,
		".hidden":                        false,
		"a/b":                            false,
		"a\x00b":                         false,
		"é":                              false,
	}
	for id, want := range cases {
		if got := SafeName(id); got != want {
			t.Errorf("SafeName(%q) = %v, want %v", id, got, want)
		}
	}
}
