package lockcheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// want matches a want comment: what a finding on its line must say.
var want = regexp.MustCompile(`// want "(.*)"$`)

// Every planted path against the rules is found, with what it does, and
// none of the paths that keep them is: a lock taken against the order
// (directly and through a call), a callback called under a lock (in a
// *Locked function, through an interface field, through a helper that
// releases one lock but not another, in a literal, deferred, handed in
// as a parameter), a *Locked function called without its lock, and a
// mutex the order leaves out.
func TestPlanted(t *testing.T) {
	dir := filepath.Join("testdata", "planted")
	order, err := ReadOrder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"T.a", "T.b"}) {
		t.Fatalf("order %q", order)
	}
	callbacks, err := ReadCallbacks(dir, "H")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(callbacks, []string{"H.Lost", "H.Tree"}) {
		t.Fatalf("callbacks %q", callbacks)
	}
	found, err := Check(dir, Spec{Order: order, Callbacks: callbacks, LockedSuffix: "Locked", Locked: "T.a"})
	if err != nil {
		t.Fatal(err)
	}
	wants := wantsIn(t, filepath.Join(dir, "planted.go"))
	got := map[int][]string{}
	for _, f := range found {
		got[f.Pos.Line] = append(got[f.Pos.Line], f.Message)
	}
	for line, w := range wants {
		if !slices.ContainsFunc(got[line], func(m string) bool { return strings.Contains(m, w) }) {
			t.Errorf("line %d: not found: %q (found %q)", line, w, got[line])
		}
	}
	for _, f := range found {
		if w, ok := wants[f.Pos.Line]; !ok || !strings.Contains(f.Message, w) {
			t.Errorf("line %d: found what is not there: %s", f.Pos.Line, f.Message)
		}
	}
}

// wantsIn maps each line of file with a want comment to what it wants.
func wantsIn(t *testing.T, file string) map[int]string {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	out := map[int]string{}
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		if m := want.FindStringSubmatch(sc.Text()); m != nil {
			out[n] = m[1]
		}
	}
	return out
}

// The order is written once: a second line is an error, and so is an
// order or a callback that names what the package does not have.
func TestSpecMistakes(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nimport \"sync\"\n\n// Lock order: T.a\ntype T struct {\n\ta sync.Mutex\n}\n\n// Lock order: T.a\nvar x int\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadOrder(dir); err == nil || !strings.Contains(err.Error(), "written 2 times") {
		t.Errorf("two orders: %v", err)
	}
	if _, err := Check(dir, Spec{Order: []string{"T.a", "T.b"}}); err == nil {
		t.Error("an order naming a lock the package lacks was taken")
	}
	if _, err := Check(dir, Spec{Order: []string{"T.a"}, Callbacks: []string{"T.cb"}}); err == nil {
		t.Error("a callback the package lacks was taken")
	}
	if _, err := ReadCallbacks(dir, "T"); err == nil {
		t.Error("a struct without a Callbacks comment gave callbacks")
	}
}
