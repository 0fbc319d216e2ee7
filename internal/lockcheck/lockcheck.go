// Package lockcheck reads one package's source and checks two rules of its
// locks: no path takes them against the order the package writes down,
// and no path calls one of its callbacks (the functions whoever owns it
// handed it) with any of them held. It is a tool for a package's tests:
// deterministic, and cheap (it type-checks the package alone, its imports
// left opaque, and runs nothing).
//
// What it follows:
//   - a mutex is a field of type sync.Mutex or sync.RWMutex of a named
//     struct type, named Type.field; Lock and RLock take it (in order:
//     every lock held must come before it), TryLock takes it without
//     waiting (never out of order), Unlock and RUnlock release it, and a
//     deferred one at the function's end;
//   - a call of a function or method of the package is followed into its
//     body with the locks held at the call, so a helper that releases a
//     lock is seen to; a function whose name ends in Spec.LockedSuffix is
//     entered holding Spec.Locked, and must be called holding it;
//   - a function literal is followed where it is written, and where it is
//     called through the one local variable it is bound to; one a go
//     statement or an Async function (time.AfterFunc) runs starts on
//     another goroutine, holding nothing;
//   - a callback is a call of a Spec.Callbacks field (a func, or any
//     method of an interface one holds), or of a func-typed parameter of
//     an exported function: code handed in from outside.
//
// What it does not see: calls through interfaces or func values other than
// those, method values, and mutexes reached through pointers held in
// variables. Branches are merged: after an if, a lock is held when one
// branch holds it.
package lockcheck

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Spec says what a package's locks and callbacks are.
type Spec struct {
	// Order names every mutex of the package, outermost first, as
	// Type.field (see ReadOrder).
	Order []string
	// Callbacks names the struct fields whose calls are callbacks, as
	// Type.field (see ReadCallbacks).
	Callbacks []string
	// A function whose name ends in LockedSuffix is entered holding the
	// lock Locked (Type.field) and must be called holding it.
	LockedSuffix string
	Locked       string
	// Async names the functions that run their func arguments on another
	// goroutine, as importpath.Func; nil is time.AfterFunc.
	Async []string
}

// Finding is one path against the rules.
type Finding struct {
	Pos     token.Position
	Message string
}

func (f Finding) String() string { return fmt.Sprintf("%s: %s", f.Pos, f.Message) }

// Check reads the package in dir (its non-test files) and returns every
// path that takes a lock against spec.Order or calls a callback holding a
// lock, in file order. An error is a package that does not parse, or a
// spec that names what the package does not have.
func Check(dir string, spec Spec) ([]Finding, error) {
	p, err := load(dir)
	if err != nil {
		return nil, err
	}
	c, err := newChecker(p, spec)
	if err != nil {
		return nil, err
	}
	c.run()
	out := make([]Finding, 0, len(c.findings))
	for _, f := range c.findings {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Pos, out[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return out[i].Message < out[j].Message
	})
	return out, nil
}

// pkg is a parsed and type-checked package.
type pkg struct {
	fset  *token.FileSet
	files []*ast.File
	info  *types.Info
}

// load parses the non-test Go files of dir and type-checks them with
// every import opaque: what the checks follow is the package's own.
func load(dir string) (*pkg, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &pkg{fset: token.NewFileSet(), info: &types.Info{
		Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
	}
	if len(p.files) == 0 {
		return nil, fmt.Errorf("lockcheck: no Go files in %s", dir)
	}
	// Errors are expected (every imported name is unknown): the package's
	// own declarations, uses and selections are recorded all the same.
	conf := types.Config{Importer: opaque{}, Error: func(error) {}}
	_, _ = conf.Check(p.files[0].Name.Name, p.fset, p.files, p.info)
	return p, nil
}

// opaque imports every package as an empty one.
type opaque struct{}

func (opaque) Import(path string) (*types.Package, error) {
	name := filepath.Base(path)
	if len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		// A major version suffix (math/rand/v2): the name is before it.
		name = filepath.Base(filepath.Dir(path))
	}
	name = strings.TrimPrefix(strings.ReplaceAll(name, "-", "_"), "go_")
	pk := types.NewPackage(path, name)
	pk.MarkComplete()
	return pk, nil
}

// lockSet is a set of locks, one bit per rank.
type lockSet uint64

// fnode is a function body the checks walk: a declaration's or a literal's.
type fnode struct {
	name string
	body *ast.BlockStmt
}

type memoKey struct {
	body  *ast.BlockStmt
	entry lockSet
}

type checker struct {
	p    *pkg
	spec Spec
	// locks are the package's mutexes by rank (spec.Order first), rank
	// their ranks, unordered those the order leaves out.
	locks []string
	rank  map[*types.Var]int
	// callbacks are the callback fields, handed the func parameters of
	// exported functions, by the name a finding gives them.
	callbacks map[*types.Var]string
	handed    map[*types.Var]string
	decls     map[*types.Func]*fnode
	// bound is the one literal a local variable holds (nil: more than one).
	bound    map[*types.Var]*ast.FuncLit
	lits     map[*ast.FuncLit]*fnode
	async    map[string]bool
	locked   int // the rank of spec.Locked, -1 for none
	memo     map[memoKey]lockSet
	findings map[string]Finding
}

func newChecker(p *pkg, spec Spec) (*checker, error) {
	c := &checker{p: p, spec: spec, rank: map[*types.Var]int{}, callbacks: map[*types.Var]string{},
		handed: map[*types.Var]string{}, decls: map[*types.Func]*fnode{}, bound: map[*types.Var]*ast.FuncLit{},
		lits: map[*ast.FuncLit]*fnode{}, async: map[string]bool{}, locked: -1,
		memo: map[memoKey]lockSet{}, findings: map[string]Finding{}}
	if spec.Async == nil {
		spec.Async = []string{"time.AfterFunc"}
	}
	for _, a := range spec.Async {
		c.async[a] = true
	}
	mutexes, fields := c.structFields()
	c.locks = slices.Clone(spec.Order)
	for _, name := range spec.Order {
		if _, ok := mutexes[name]; !ok {
			return nil, fmt.Errorf("lockcheck: the lock order names %s, which is not a mutex of the package", name)
		}
	}
	for _, name := range sortedKeys(mutexes) {
		if !slices.Contains(c.locks, name) {
			// Checked all the same, ranked after the ordered ones.
			c.report(mutexes[name].Pos(), fmt.Sprintf("mutex %s is not in the lock order", name))
			c.locks = append(c.locks, name)
		}
	}
	if len(c.locks) > 64 {
		return nil, errors.New("lockcheck: more than 64 mutexes")
	}
	for i, name := range c.locks {
		c.rank[mutexes[name]] = i
	}
	if spec.Locked != "" {
		if _, ok := mutexes[spec.Locked]; !ok {
			return nil, fmt.Errorf("lockcheck: Locked names %s, which is not a mutex of the package", spec.Locked)
		}
		c.locked = slices.Index(c.locks, spec.Locked)
	}
	for _, name := range spec.Callbacks {
		v, ok := fields[name]
		if !ok {
			return nil, fmt.Errorf("lockcheck: callback %s is not a field of the package", name)
		}
		c.callbacks[v] = name
	}
	c.collectFuncs()
	return c, nil
}

// structFields returns the fields of the package's named struct types by
// Type.field: the mutexes apart.
func (c *checker) structFields() (mutexes, fields map[string]*types.Var) {
	mutexes, fields = map[string]*types.Var{}, map[string]*types.Var{}
	for s := range c.p.structTypes() {
		c.fieldsOf(s.file, s.name, s.st, mutexes, fields)
	}
	return mutexes, fields
}

// structType is a named struct type a file of the package declares.
type structType struct {
	file *ast.File
	name string
	st   *ast.StructType
}

// structTypes yields the named struct types of the package's files.
func (p *pkg) structTypes() iter.Seq[structType] {
	return func(yield func(structType) bool) {
		for _, f := range p.files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.TYPE {
					continue
				}
				for _, s := range gd.Specs {
					ts := s.(*ast.TypeSpec)
					if st, ok := ts.Type.(*ast.StructType); ok && !yield(structType{f, ts.Name.Name, st}) {
						return
					}
				}
			}
		}
	}
}

func (c *checker) fieldsOf(f *ast.File, prefix string, st *ast.StructType, mutexes, fields map[string]*types.Var) {
	for _, fl := range st.Fields.List {
		for _, id := range fl.Names {
			v, ok := c.p.info.Defs[id].(*types.Var)
			if !ok {
				continue
			}
			name := prefix + "." + id.Name
			fields[name] = v
			if isMutex(f, fl.Type) {
				mutexes[name] = v
			}
			if inner, ok := fl.Type.(*ast.StructType); ok {
				c.fieldsOf(f, name, inner, mutexes, fields)
			}
		}
	}
}

// isMutex reports whether typ is sync.Mutex or sync.RWMutex as file f
// imports sync.
func isMutex(f *ast.File, typ ast.Expr) bool {
	sel, ok := typ.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Mutex" && sel.Sel.Name != "RWMutex") {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	for _, imp := range f.Imports {
		if imp.Path.Value != `"sync"` {
			continue
		}
		if imp.Name == nil {
			return x.Name == "sync"
		}
		return x.Name == imp.Name.Name
	}
	return false
}

// collectFuncs indexes the package's functions, its literals and the
// local variables bound to one, and the func parameters of exported
// functions.
func (c *checker) collectFuncs() {
	for _, f := range c.p.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn, ok := c.p.info.Defs[fd.Name].(*types.Func)
			if !ok {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				name = recvName(fd.Recv.List[0].Type) + "." + name
			}
			c.decls[fn] = &fnode{name: name, body: fd.Body}
			if fd.Name.IsExported() {
				c.handedParams(name, fd.Type)
			}
			c.collectLits(name, fd.Body)
		}
	}
}

func recvName(t ast.Expr) string {
	switch t := t.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

func (c *checker) handedParams(fname string, ft *ast.FuncType) {
	for _, fl := range ft.Params.List {
		if _, ok := fl.Type.(*ast.FuncType); !ok {
			continue
		}
		for _, id := range fl.Names {
			if v, ok := c.p.info.Defs[id].(*types.Var); ok {
				c.handed[v] = fmt.Sprintf("%s (a func %s was handed)", id.Name, fname)
			}
		}
	}
}

func (c *checker) collectLits(fname string, body *ast.BlockStmt) {
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			pos := c.p.fset.Position(n.Pos())
			c.lits[n] = &fnode{name: fmt.Sprintf("the func literal of %s (line %d)", fname, pos.Line), body: n.Body}
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i, l := range n.Lhs {
					c.bind(l, n.Rhs[i])
				}
			}
		case *ast.ValueSpec:
			if len(n.Names) == len(n.Values) {
				for i, id := range n.Names {
					c.bind(id, n.Values[i])
				}
			}
		}
		return true
	})
}

// bind notes that the variable lhs holds the literal rhs, if it is one.
func (c *checker) bind(lhs, rhs ast.Expr) {
	id, ok := lhs.(*ast.Ident)
	lit, isLit := rhs.(*ast.FuncLit)
	if !ok || !isLit {
		return
	}
	v, ok := c.p.info.Defs[id].(*types.Var)
	if !ok {
		if v, ok = c.p.info.Uses[id].(*types.Var); !ok {
			return
		}
	}
	if old, seen := c.bound[v]; seen && old != lit {
		c.bound[v] = nil
		return
	}
	c.bound[v] = lit
}

// run walks every function from its entry, and every literal as the start
// of a goroutine (where it is written, it is walked with the locks held).
func (c *checker) run() {
	for _, fn := range sortedFuncs(c.decls) {
		entry := lockSet(0)
		if c.locked >= 0 && c.spec.LockedSuffix != "" && strings.HasSuffix(fn.name, c.spec.LockedSuffix) {
			entry = 1 << c.locked
		}
		c.walk(fn, entry, nil)
	}
	lits := make([]*ast.FuncLit, 0, len(c.lits))
	for l := range c.lits {
		lits = append(lits, l)
	}
	sort.Slice(lits, func(i, j int) bool { return lits[i].Pos() < lits[j].Pos() })
	for _, l := range lits {
		c.walk(c.lits[l], 0, nil)
	}
}

func sortedFuncs(m map[*types.Func]*fnode) []*fnode {
	out := make([]*fnode, 0, len(m))
	for _, fn := range m {
		out = append(out, fn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].body.Pos() < out[j].body.Pos() })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// walk follows fn entered holding entry and returns what it holds when it
// returns. via is the path of calls that led to it.
func (c *checker) walk(fn *fnode, entry lockSet, via []string) lockSet {
	k := memoKey{fn.body, entry}
	if exit, ok := c.memo[k]; ok {
		return exit
	}
	// A recursive call meanwhile is taken to hold what it was given.
	c.memo[k] = entry
	f := &frame{c: c, fn: fn, via: append(slices.Clip(via), fn.name)}
	s, falls := f.stmts(fn.body.List, entry)
	exit := f.returns
	if falls {
		exit |= s
	}
	// Deferred calls run at the end, the last first.
	for i := len(f.deferred) - 1; i >= 0; i-- {
		exit = f.call(f.deferred[i], exit)
	}
	c.memo[k] = exit
	return exit
}

func (c *checker) report(pos token.Pos, msg string) {
	p := c.p.fset.Position(pos)
	key := p.String() + " " + msg
	if _, ok := c.findings[key]; !ok {
		c.findings[key] = Finding{Pos: p, Message: msg}
	}
}

// names renders a set of locks.
func (c *checker) names(s lockSet) string {
	var out []string
	for i, name := range c.locks {
		if s&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}
