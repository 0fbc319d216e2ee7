package web

import (
	"io/fs"
	"regexp"
	"slices"
	"testing"

	"github.com/berth-sh/berth"
)

// jsList returns the quoted names of the array or set literal that
// `const name = ` starts in the UI's file.
func jsList(t *testing.T, file, name string) []string {
	t.Helper()
	src, err := fs.ReadFile(FS, file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\nconst ` + name + ` = (?:new Set\()?\[(.*?)\]`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s has no const %s = [ … ]", file, name)
	}
	var out []string
	for _, q := range regexp.MustCompile(`'([^']*)'`).FindAllSubmatch(m[1], -1) {
		out = append(out, string(q[1]))
	}
	return out
}

// The session screen listens on the stream for every declared event kind
// (EventSource hands an event only to the listeners of its name: a kind
// missing from STREAM_TYPES shows only after a reload), and for nothing
// else.
func TestStreamTypesAreTheEventKinds(t *testing.T) {
	listed := jsList(t, "js/session.js", "STREAM_TYPES")
	for _, name := range listed {
		if !berth.IsEventKind(name) {
			t.Errorf("js/session.js STREAM_TYPES has %q, which is not a declared event kind", name)
		}
	}
	for _, k := range berth.EventKinds() {
		if !slices.Contains(listed, k.Name) {
			t.Errorf("js/session.js STREAM_TYPES misses %q", k.Name)
		}
	}
}

// The UI's other lists of event types, and the types its transcript
// renders by a case of their own, name declared kinds only.
func TestUIEventTypesAreDeclared(t *testing.T) {
	var names []string
	for _, l := range []struct{ file, name string }{
		{"js/session.js", "REFRESH_ON"},
		{"js/session.js", "CHECKPOINT_ON"},
		{"js/transcript.js", "MACHINE"},
		{"js/transcript.js", "QUEUE"},
	} {
		names = append(names, jsList(t, l.file, l.name)...)
	}
	src, err := fs.ReadFile(FS, "js/transcript.js")
	if err != nil {
		t.Fatal(err)
	}
	cases := regexp.MustCompile(`\bcase '([^']*)':`).FindAllSubmatch(src, -1)
	if len(cases) == 0 {
		t.Fatal("js/transcript.js has no case of an event type")
	}
	for _, c := range cases {
		names = append(names, string(c[1]))
	}
	for _, name := range names {
		if !berth.IsEventKind(name) {
			t.Errorf("the UI names event type %q, which is not declared", name)
		}
	}
}
