package lockcheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"
)

// frame is one walk of a function body from one set of held locks.
type frame struct {
	c  *checker
	fn *fnode
	// via is the path of calls to this body, ending with it.
	via []string
	// returns is what is held at the returns; deferred the calls deferred.
	returns  lockSet
	deferred []*ast.CallExpr
	// targets are the statements break and continue leave to, innermost last.
	targets []*target
	label   string
}

// target is a loop, switch or select that break (or continue) may leave.
type target struct {
	label     string
	loop      bool
	breaks    lockSet
	broke     bool
	continues lockSet
}

// stmts walks a list of statements from s; falls is false when the list
// cannot run on past its end (a return, a panic, a break or continue).
func (f *frame) stmts(list []ast.Stmt, s lockSet) (lockSet, bool) {
	for _, st := range list {
		var falls bool
		if s, falls = f.stmt(st, s); !falls {
			return s, false
		}
	}
	return s, true
}

func (f *frame) stmt(st ast.Stmt, s lockSet) (lockSet, bool) {
	label := f.label
	f.label = ""
	switch st := st.(type) {
	case *ast.ReturnStmt:
		for _, e := range st.Results {
			s = f.expr(e, s)
		}
		f.returns |= s
		return s, false
	case *ast.BranchStmt:
		return f.branch(st, s)
	case *ast.BlockStmt:
		return f.stmts(st.List, s)
	case *ast.LabeledStmt:
		f.label = st.Label.Name
		return f.stmt(st.Stmt, s)
	case *ast.IfStmt:
		return f.ifStmt(st, s)
	case *ast.SwitchStmt:
		if st.Init != nil {
			s, _ = f.stmt(st.Init, s)
		}
		if st.Tag != nil {
			s = f.expr(st.Tag, s)
		}
		return f.cases(label, st.Body, s, false)
	case *ast.TypeSwitchStmt:
		if st.Init != nil {
			s, _ = f.stmt(st.Init, s)
		}
		s, _ = f.stmt(st.Assign, s)
		return f.cases(label, st.Body, s, false)
	case *ast.SelectStmt:
		return f.cases(label, st.Body, s, true)
	case *ast.ForStmt:
		if st.Init != nil {
			s, _ = f.stmt(st.Init, s)
		}
		return f.loop(label, st.Cond, st.Post, st.Body, s, st.Cond != nil)
	case *ast.RangeStmt:
		s = f.expr(st.X, s)
		return f.loop(label, nil, nil, st.Body, s, true)
	}
	return f.straight(st, s)
}

// straight walks a statement that does not branch; it falls through
// unless it is a panic.
func (f *frame) straight(st ast.Stmt, s lockSet) (lockSet, bool) {
	switch st := st.(type) {
	case *ast.ExprStmt:
		return f.expr(st.X, s), !isPanic(st.X)
	case *ast.AssignStmt:
		for _, e := range st.Rhs {
			s = f.expr(e, s)
		}
		for _, e := range st.Lhs {
			s = f.expr(e, s)
		}
	case *ast.DeclStmt:
		if gd, ok := st.Decl.(*ast.GenDecl); ok {
			for _, sp := range gd.Specs {
				if vs, ok := sp.(*ast.ValueSpec); ok {
					for _, e := range vs.Values {
						s = f.expr(e, s)
					}
				}
			}
		}
	case *ast.IncDecStmt:
		s = f.expr(st.X, s)
	case *ast.SendStmt:
		s = f.expr(st.Value, f.expr(st.Chan, s))
	case *ast.GoStmt:
		// The goroutine starts holding nothing (its function is walked as
		// a start of its own); its arguments are evaluated here.
		if sel, ok := st.Call.Fun.(*ast.SelectorExpr); ok {
			s = f.expr(sel.X, s)
		}
		for _, a := range st.Call.Args {
			s = f.expr(a, s)
		}
	case *ast.DeferStmt:
		f.deferred = append(f.deferred, st.Call)
	}
	return s, true
}

func (f *frame) ifStmt(st *ast.IfStmt, s lockSet) (lockSet, bool) {
	if st.Init != nil {
		s, _ = f.stmt(st.Init, s)
	}
	s = f.expr(st.Cond, s)
	then, thenFalls := f.stmts(st.Body.List, s)
	els, elseFalls := s, true
	if st.Else != nil {
		els, elseFalls = f.stmt(st.Else, s)
	}
	switch {
	case thenFalls && elseFalls:
		return then | els, true
	case thenFalls:
		return then, true
	case elseFalls:
		return els, true
	}
	return then | els, false
}

// cases walks the clauses of a switch or a select, each from s. A switch
// without a default may run none; a select always runs one.
func (f *frame) cases(label string, body *ast.BlockStmt, s lockSet, isSelect bool) (lockSet, bool) {
	t := &target{label: label}
	f.targets = append(f.targets, t)
	defer func() { f.targets = f.targets[:len(f.targets)-1] }()
	var out lockSet
	falls, hasDefault := false, false
	for _, cl := range body.List {
		cs := s
		var list []ast.Stmt
		switch cl := cl.(type) {
		case *ast.CaseClause:
			hasDefault = hasDefault || cl.List == nil
			for _, e := range cl.List {
				cs = f.expr(e, cs)
			}
			list = cl.Body
		case *ast.CommClause:
			hasDefault = hasDefault || cl.Comm == nil
			if cl.Comm != nil {
				cs, _ = f.stmt(cl.Comm, cs)
			}
			list = cl.Body
		}
		if r, ok := f.stmts(list, cs); ok {
			out, falls = out|r, true
		}
	}
	if !isSelect && !hasDefault {
		out, falls = out|s, true
	}
	if t.broke {
		out, falls = out|t.breaks, true
	}
	return out, falls
}

// loop walks a loop's body until what is held at its head settles.
func (f *frame) loop(label string, cond ast.Expr, post ast.Stmt, body *ast.BlockStmt, s lockSet, mayEnd bool) (lockSet, bool) {
	t := &target{label: label, loop: true}
	f.targets = append(f.targets, t)
	defer func() { f.targets = f.targets[:len(f.targets)-1] }()
	head := s
	for range 4 {
		if cond != nil {
			head = f.expr(cond, head)
		}
		end, falls := f.stmts(body.List, head)
		next := head | t.continues
		if falls {
			next |= end
		}
		if post != nil {
			next, _ = f.stmt(post, next)
		}
		if next == head {
			break
		}
		head = next
	}
	var out lockSet
	if mayEnd {
		out = head
	}
	if t.broke {
		out |= t.breaks
	}
	return out, mayEnd || t.broke
}

func (f *frame) branch(st *ast.BranchStmt, s lockSet) (lockSet, bool) {
	if st.Tok == token.FALLTHROUGH {
		return s, true
	}
	for i := len(f.targets) - 1; i >= 0; i-- {
		t := f.targets[i]
		if st.Label != nil && t.label != st.Label.Name {
			continue
		}
		switch {
		case st.Tok == token.BREAK:
			t.breaks, t.broke = t.breaks|s, true
			return s, false
		case st.Tok == token.CONTINUE && t.loop:
			t.continues |= s
			return s, false
		}
	}
	// A goto: where it lands is not followed.
	return s, false
}

func isPanic(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fun.(*ast.Ident)
	return ok && id.Name == "panic"
}

// expr evaluates e from s: its calls in order, each literal where it is
// written.
func (f *frame) expr(e ast.Expr, s lockSet) lockSet {
	if e == nil {
		return s
	}
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			s = f.call(n, s)
			return false
		case *ast.FuncLit:
			f.c.walk(f.c.lits[n], s, f.via)
			return false
		}
		return true
	})
	return s
}

// call evaluates a call's function and arguments, then makes it.
func (f *frame) call(e *ast.CallExpr, s lockSet) lockSet {
	c := f.c
	fun := ast.Unparen(e.Fun)
	if sel, ok := fun.(*ast.SelectorExpr); ok {
		s = f.expr(sel.X, s)
	}
	async := c.isAsync(fun)
	for _, a := range e.Args {
		if _, ok := a.(*ast.FuncLit); ok && async {
			// Run on another goroutine: walked as a start of its own.
			continue
		}
		s = f.expr(a, s)
	}
	if lock, op := c.lockOp(fun); lock >= 0 {
		return f.lockOp(e.Pos(), lock, op, s)
	}
	if name := c.callbackOf(fun); name != "" {
		if s != 0 {
			c.report(e.Pos(), fmt.Sprintf("calls %s holding %s%s", name, c.names(s), f.path()))
		}
		return s
	}
	if lit, ok := fun.(*ast.FuncLit); ok {
		return c.walk(c.lits[lit], s, f.via)
	}
	fn := c.target(fun)
	if fn == nil {
		return s
	}
	if c.locked >= 0 && c.spec.LockedSuffix != "" && strings.HasSuffix(fn.name, c.spec.LockedSuffix) && s&(1<<c.locked) == 0 {
		c.report(e.Pos(), fmt.Sprintf("calls %s without holding %s%s", fn.name, c.locks[c.locked], f.path()))
	}
	return c.walk(fn, s, f.via)
}

// path says how the walk got here, when through calls.
func (f *frame) path() string {
	if len(f.via) < 2 {
		return ""
	}
	return " (via " + strings.Join(f.via, " → ") + ")"
}

func (f *frame) lockOp(pos token.Pos, lock int, op string, s lockSet) lockSet {
	c := f.c
	bit := lockSet(1) << lock
	switch op {
	case "Lock", "RLock":
		// What is held that comes at or after it in the order.
		if late := s &^ (bit - 1); late != 0 {
			c.report(pos, fmt.Sprintf("takes %s holding %s, against the lock order%s",
				c.locks[lock], c.names(late), f.path()))
		}
		return s | bit
	case "TryLock", "RTryLock":
		return s | bit
	}
	return s &^ bit
}

// lockOp returns the rank of the mutex fun locks or unlocks, and how;
// -1 when fun is not that.
func (c *checker) lockOp(fun ast.Expr) (int, string) {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return -1, ""
	}
	switch sel.Sel.Name {
	case "Lock", "Unlock", "RLock", "RUnlock", "TryLock", "RTryLock":
	default:
		return -1, ""
	}
	if v := c.fieldOf(sel.X); v != nil {
		if r, ok := c.rank[v]; ok {
			return r, sel.Sel.Name
		}
	}
	return -1, ""
}

// fieldOf returns the field x selects, if it does.
func (c *checker) fieldOf(x ast.Expr) *types.Var {
	sx, ok := ast.Unparen(x).(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	if sel := c.p.info.Selections[sx]; sel != nil && sel.Kind() == types.FieldVal {
		v, _ := sel.Obj().(*types.Var)
		return v
	}
	return nil
}

// callbackOf names the callback fun is, or "".
func (c *checker) callbackOf(fun ast.Expr) string {
	switch fun := fun.(type) {
	case *ast.SelectorExpr:
		if name := c.callbacks[c.fieldOf(fun)]; name != "" {
			return name
		}
		// A method of the interface a callback field holds.
		if name := c.callbacks[c.fieldOf(fun.X)]; name != "" {
			return name + "." + fun.Sel.Name
		}
	case *ast.Ident:
		if v, ok := c.p.info.Uses[fun].(*types.Var); ok {
			return c.handed[v]
		}
	}
	return ""
}

// isAsync reports whether fun is one of spec.Async.
func (c *checker) isAsync(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	pn, ok := c.p.info.Uses[id].(*types.PkgName)
	return ok && c.async[pn.Imported().Path()+"."+sel.Sel.Name]
}

// target returns the body a call of fun runs, when it is the package's.
func (c *checker) target(fun ast.Expr) *fnode {
	switch fun := fun.(type) {
	case *ast.SelectorExpr:
		if sel := c.p.info.Selections[fun]; sel != nil {
			if fn, ok := sel.Obj().(*types.Func); ok {
				return c.decls[fn.Origin()]
			}
		}
	case *ast.Ident:
		switch o := c.p.info.Uses[fun].(type) {
		case *types.Func:
			return c.decls[o.Origin()]
		case *types.Var:
			if lit := c.bound[o]; lit != nil {
				return c.lits[lit]
			}
		}
	case *ast.IndexExpr:
		return c.target(fun.X)
	case *ast.IndexListExpr:
		return c.target(fun.X)
	}
	return nil
}
