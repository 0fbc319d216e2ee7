package lockcheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"
)

// orderMark begins the one comment line that writes a package's lock
// order: "Lock order: A > B > C", outermost first, each lock as Type.field.
const orderMark = "Lock order:"

// callbacksMark begins the comment, in a struct, after which every field
// declared is a callback.
const callbacksMark = "Callbacks:"

// ReadOrder returns the lock order the package in dir writes down: the
// names on its one comment line that begins with "Lock order:", separated
// by ">". A package with no such line, or two, is an error: the order is
// written once.
func ReadOrder(dir string) ([]string, error) {
	p, err := load(dir)
	if err != nil {
		return nil, err
	}
	var found []string
	var at []token.Position
	for _, f := range p.files {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
				if rest, ok := strings.CutPrefix(text, orderMark); ok {
					at = append(at, p.fset.Position(c.Pos()))
					found = nil
					for _, name := range strings.Split(rest, ">") {
						found = append(found, strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(name), ".")))
					}
				}
			}
		}
	}
	switch len(at) {
	case 0:
		return nil, fmt.Errorf("lockcheck: no %q line in %s", orderMark, dir)
	case 1:
		return found, nil
	}
	return nil, fmt.Errorf("lockcheck: the lock order is written %d times (%v): once is the rule", len(at), at)
}

// ReadCallbacks returns the callbacks struct type typ of the package in
// dir declares: its fields after the comment in it that begins with
// "Callbacks:", as typ.field.
func ReadCallbacks(dir, typ string) ([]string, error) {
	p, err := load(dir)
	if err != nil {
		return nil, err
	}
	for s := range p.structTypes() {
		if s.name == typ {
			return callbacksIn(s.file, typ, s.st)
		}
	}
	return nil, fmt.Errorf("lockcheck: no struct type %s in %s", typ, dir)
}

func callbacksIn(f *ast.File, typ string, st *ast.StructType) ([]string, error) {
	mark := token.NoPos
	for _, cg := range f.Comments {
		if cg.Pos() > st.Fields.Opening && cg.End() < st.Fields.Closing && strings.HasPrefix(cg.Text(), callbacksMark) {
			mark = cg.Pos()
			break
		}
	}
	if mark == token.NoPos {
		return nil, fmt.Errorf("lockcheck: struct %s has no %q comment", typ, callbacksMark)
	}
	var out []string
	for _, fl := range st.Fields.List {
		if fl.Pos() < mark {
			continue
		}
		for _, id := range fl.Names {
			out = append(out, typ+"."+id.Name)
		}
	}
	return out, nil
}
