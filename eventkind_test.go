package berth

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// eventNames are the declared event types.
func eventNames() []string {
	var out []string
	for _, k := range EventKinds() {
		out = append(out, k.Name)
	}
	return out
}

// eventConsts returns the string constants named Event<Upper>… in the
// non-test Go files of the module below dir, as "path: Name" → value.
func eventConsts(t *testing.T, dir string) map[string]string {
	t.Helper()
	isEvent := regexp.MustCompile(`^Event[A-Z]`)
	out := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Hidden folders, test data and the UI's node modules hold no
			// code of the module.
			if path != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			decl, ok := n.(*ast.GenDecl)
			if !ok || decl.Tok != token.CONST {
				return true
			}
			for _, spec := range decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !isEvent.MatchString(name.Name) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatalf("%s: %s: %v", path, name.Name, err)
					}
					out[path+": "+name.Name] = v
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every event type constant, in any package, is a declared kind, and every
// declared kind is one of the root package's constants: a new type cannot
// be emitted without being declared (and so followed by hooks, `berth
// logs`, the UI and the docs).
func TestEventKindsDeclareEveryEventConstant(t *testing.T) {
	consts := eventConsts(t, ".")
	root := map[string]bool{}
	for where, v := range consts {
		if !IsEventKind(v) {
			t.Errorf("%s = %q is not declared in eventKinds (eventkind.go)", where, v)
		}
		if !strings.Contains(where, "/") {
			root[v] = true
		}
	}
	for _, name := range eventNames() {
		if !root[name] {
			t.Errorf("event kind %q has no Event… constant in the root package", name)
		}
	}
}

// Each kind has a wire name (unique, lower case), what it is about and a
// one-line doc.
func TestEventKindsAreWellFormed(t *testing.T) {
	abouts := []EventAbout{AboutSession, AboutTurn, AboutAgent, AboutRequest, AboutChild, AboutCheckpoint}
	wire := regexp.MustCompile(`^[a-z][a-z_]*[a-z]$`)
	seen := map[string]bool{}
	for _, k := range EventKinds() {
		if !wire.MatchString(k.Name) {
			t.Errorf("kind %q: the name is not lower-case words joined by _", k.Name)
		}
		if seen[k.Name] {
			t.Errorf("kind %q is declared twice", k.Name)
		}
		seen[k.Name] = true
		if !slices.Contains(abouts, k.About) {
			t.Errorf("kind %q: about %q is none of %v", k.Name, k.About, abouts)
		}
		if k.Doc == "" || strings.Contains(k.Doc, "\n") {
			t.Errorf("kind %q: doc %q is not one line", k.Name, k.Doc)
		}
	}
	if IsEventKind("turn_over") || IsEventKind("") {
		t.Error("IsEventKind takes an undeclared name")
	}
}

// docs/api.md's list of event types (The objects: Events) names every
// declared kind and nothing else.
func TestDocsListEveryEventKind(t *testing.T) {
	b, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n### Events\n")
	if start < 0 {
		t.Fatal(`docs/api.md has no "### Events" section`)
	}
	section := doc[start+1:]
	if end := strings.Index(section[1:], "\n#"); end >= 0 {
		section = section[:end+1]
	}
	list := strings.Index(section, "Types and their data:")
	if list < 0 {
		t.Fatal(`docs/api.md, The objects: Events has no "Types and their data:"`)
	}
	// Every name in backquotes in the list is an event type.
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(section[list:], -1) {
		if !slices.Contains(listed, m[1]) {
			listed = append(listed, m[1])
		}
		if !IsEventKind(m[1]) {
			t.Errorf("docs/api.md, The objects: Events lists %q, which is not a declared kind", m[1])
		}
	}
	declared := eventNames()
	for _, name := range declared {
		if !slices.Contains(listed, name) {
			t.Errorf("docs/api.md, The objects: Events does not list %q", name)
		}
	}
	if !t.Failed() && !slices.Equal(listed, declared) {
		t.Errorf("docs/api.md, The objects: Events lists the types in another order than eventkind.go:\n%v\n%v", listed, declared)
	}
}
