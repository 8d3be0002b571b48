package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// An empty list is [] in every command's JSON, never null.
func TestJSONListsAreEmptyNotNull(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	yml := filepath.Join(t.TempDir(), "l.yaml")
	if err := os.WriteFile(yml, []byte("resources:\n  - {name: api, kind: requests, ledger: 1, window: 1m, default_limit: 5}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		code ExitCode
		args []string
		list string
	}{
		{ExitOK, []string{"resources", "list"}, "resources"},
		{ExitOK, []string{"apply", "-f", yml}, "changes"},
		{ExitOK, []string{"apply", "-f", yml, "--dry-run"}, "changes"}, // nothing to do
		{ExitOK, []string{"apply", "-f", yml}, "changes"},              // nothing to do
		{ExitOK, []string{"users", "list", "api"}, "users"},
		{ExitError, []string{"tigerbeetle", "status", "--dir", dir}, "addresses"},
		{ExitError, []string{"tigerbeetle", "status", "--dir", dir}, "replicas"},
		{ExitOK, []string{"tigerbeetle", "down", "--dir", dir}, "addresses"},
	} {
		r := e.code(c.code, append([]string{"-o", "json"}, c.args...)...)
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
			t.Fatalf("tblimit -o json %s: %v: %q", strings.Join(c.args, " "), err, r.stdout)
		}
		if !bytes.HasPrefix(m[c.list], []byte("[")) || strings.Contains(r.stdout, "null") {
			t.Errorf("tblimit -o json %s: %s = %s in %s, want a list, and no null anywhere", strings.Join(c.args, " "), c.list, m[c.list], r.stdout)
		}
	}
}

func TestNoNullLists(t *testing.T) {
	type inner struct{ L []int }
	type outer struct {
		A []string
		B []inner
		P *inner
		N *inner
		x []int
	}
	in := outer{B: []inner{{}}, P: &inner{}, x: nil}
	got := noNullLists(reflect.ValueOf(in)).Interface().(outer)
	b, _ := json.Marshal(got)
	if string(b) != `{"A":[],"B":[{"L":[]}],"P":{"L":[]},"N":null}` {
		t.Errorf("noNullLists = %s", b)
	}
	if in.B[0].L != nil || in.P.L != nil {
		t.Errorf("noNullLists changed its argument: %+v", in)
	}
}
