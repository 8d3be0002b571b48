package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// sourceFile is a file of the package's source, parsed.
type sourceFile struct {
	path string // relative to package ledger's directory, with slashes
	fset *token.FileSet
	f    *ast.File
}

// parseSource parses the files that are not tests in dirs (relative to
// package ledger's directory), identifiers resolved within each file, and
// fails the test on fewer than min files: not the package's source.
func parseSource(t *testing.T, min int, dirs ...string) []sourceFile {
	t.Helper()
	var out []sourceFile
	for _, dir := range dirs {
		paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, sourceFile{path: filepath.ToSlash(path), fset: fset, f: f})
		}
	}
	if len(out) < min {
		t.Fatalf("parsed %d files in %v: not package ledger's source", len(out), dirs)
	}
	return out
}
