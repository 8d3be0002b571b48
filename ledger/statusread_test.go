package ledger_test

import (
	"go/ast"
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
	for _, sf := range parseSource(t, 30, ".", "internal/pipeline", "internal/view") {
		name := ""
		for _, im := range sf.f.Imports {
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
		ast.Inspect(sf.f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			s := sel.Sel.Name
			if ok && x.Name == name && (strings.HasPrefix(s, "Transfer") || strings.HasPrefix(s, "Account")) && !types[s] {
				t.Errorf("%s:%d: %s.%s read outside package internal/status", sf.path, sf.fset.Position(sel.Pos()).Line, name, s)
			}
			return true
		})
	}
}
