package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDecisionsMadeInLedger walks the module's source and fails on a
// Decision made outside package ledger: a composite literal of
// ledger.Decision (or an element of a slice, array or map of them) in a
// file that is not a test, or a second name for the type (an alias), which
// would let literals past this check. What a Decision says, a denial above
// all, is decided here (decision.go); the layers above use its
// constructors. Tests may write literals of the values they expect.
func TestDecisionsMadeInLedger(t *testing.T) {
	const ledgerPath = "github.com/tblimit/tblimit/ledger"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	walked := 0
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if e.IsDir() {
			if n := e.Name(); rel == "ledger" || n == "testdata" || n == "node_modules" || rel != "." && strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		walked++
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p != ledgerPath {
				continue
			}
			name := "ledger"
			if im.Name != nil {
				name = im.Name.Name
			}
			for _, pos := range decisionsMade(f, name) {
				t.Errorf("%s:%d: a ledger.Decision made outside package ledger: use one of its constructors", rel, fset.Position(pos).Line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if walked < 50 {
		t.Fatalf("walked %d files under %s: not the module's source", walked, root)
	}
}

// decisionsMade returns where f, which imports package ledger as name,
// writes a ledger.Decision literal or declares an alias of the type.
func decisionsMade(f *ast.File, name string) []token.Pos {
	isDecision := func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Decision" {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == name
	}
	// elements is the element type of a slice, array or map type.
	elements := func(e ast.Expr) ast.Expr {
		switch t := e.(type) {
		case *ast.ArrayType:
			return t.Elt
		case *ast.MapType:
			return t.Value
		}
		return nil
	}
	var at []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeSpec:
			if n.Assign.IsValid() && isDecision(n.Type) {
				at = append(at, n.Pos())
			}
		case *ast.CompositeLit:
			if isDecision(n.Type) {
				at = append(at, n.Pos())
			}
			if elt := elements(n.Type); elt != nil && isDecision(elt) {
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						e = kv.Value
					}
					if cl, ok := e.(*ast.CompositeLit); ok && cl.Type == nil {
						at = append(at, cl.Pos())
					}
				}
			}
		}
		return true
	})
	return at
}
