package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOpNamedInThreeFiles parses package ledger's source and fails when a
// file other than op.go, pipeline.go and decide.go names the pipeline's op:
// its types (op, opEvent), or a function that makes, sends or frees one.
// The rest of the package is called with users, transfers and results.
func TestOpNamedInThreeFiles(t *testing.T) {
	allowed := []string{"decide.go", "op.go", "pipeline.go"}
	names := map[string]bool{"op": true, "opEvent": true, "newOp": true, "freeOp": true, "submit": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var naming []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		named := false
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				// A package-level name: not declared in this file.
				named = named || names[n.Name] && n.Obj == nil
			case *ast.SelectorExpr:
				named = named || names[n.Sel.Name]
				ast.Inspect(n.X, func(m ast.Node) bool {
					id, ok := m.(*ast.Ident)
					named = named || ok && names[id.Name] && id.Obj == nil
					return true
				})
				return false
			}
			return true
		})
		if named {
			naming = append(naming, path)
		}
	}
	if len(files) < 30 {
		t.Fatalf("%d files: not package ledger's source", len(files))
	}
	if !slices.Equal(naming, allowed) {
		t.Errorf("files that name an op: %v, want %v", naming, allowed)
	}
}
