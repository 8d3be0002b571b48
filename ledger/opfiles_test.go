package ledger_test

import (
	"go/ast"
	"slices"
	"strings"
	"testing"
)

// TestOpNamedInThreeFiles parses package ledger and package
// internal/pipeline, and fails when a file other than the pipeline's two
// and ledger's decide.go names an op: its type (pipeline.Op, ledger's op),
// or a method of the Pipeline that makes, sends, frees or reads one. The
// rest of package ledger is called by the pipeline with users, transfers
// and results (host.go).
func TestOpNamedInThreeFiles(t *testing.T) {
	want := []string{"decide.go", "internal/pipeline/op.go", "internal/pipeline/pipeline.go"}
	methods := map[string]bool{"New": true, "Free": true, "Submit": true, "NewAttempt": true, "Redescribe": true}
	var naming []string
	for _, sf := range parseSource(t, 30, ".", "internal/pipeline") {
		inLedger := !strings.HasPrefix(sf.path, "internal/")
		named := false
		ast.Inspect(sf.f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				switch {
				case !inLedger && n.Name == "Op":
					named = true
				case inLedger && n.Name == "op":
					// The type, not a variable of that name.
					named = named || n.Obj == nil || n.Obj.Kind == ast.Typ
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "pipeline" && n.Sel.Name == "Op" {
					named = true
				}
				if x, ok := n.X.(*ast.SelectorExpr); ok && x.Sel.Name == "pipe" && methods[n.Sel.Name] {
					named = true // c.pipe.Submit(…)
				}
			}
			return true
		})
		if named {
			naming = append(naming, sf.path)
		}
	}
	if !slices.Equal(naming, want) {
		t.Errorf("files that name an op: %v, want %v", naming, want)
	}
}
