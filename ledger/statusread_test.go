package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStatusesReadInStatusPackage parses package ledger and the pipeline,
// and fails on a TigerBeetle status (a tb.Transfer… or tb.Account…
// constant) named outside package internal/status: what a status means is
// decided there, one function per meaning.
func TestStatusesReadInStatusPackage(t *testing.T) {
	const tbPath = "github.com/tigerbeetle/tigerbeetle-go"
	types := map[string]bool{
		"Transfer": true, "TransferFlags": true,
		"Account": true, "AccountFlags": true, "AccountFilter": true, "AccountFilterFlags": true, "AccountBalance": true,
	}
	walked := 0
	for _, dir := range []string{".", "internal/pipeline", "internal/view"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			walked++
			name := ""
			for _, im := range f.Imports {
				if p, _ := strconv.Unquote(im.Path.Value); p == tbPath {
					name = "tigerbeetle_go"
					if im.Name != nil {
						name = im.Name.Name
					}
				}
			}
			if name == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				s := sel.Sel.Name
				if ok && x.Name == name && (strings.HasPrefix(s, "Transfer") || strings.HasPrefix(s, "Account")) && !types[s] {
					t.Errorf("%s:%d: %s.%s read outside package internal/status", path, fset.Position(sel.Pos()).Line, name, s)
				}
				return true
			})
		}
	}
	if walked < 30 {
		t.Fatalf("walked %d files: not package ledger's source", walked)
	}
}
