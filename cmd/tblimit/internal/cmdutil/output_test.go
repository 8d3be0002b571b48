package cmdutil

import (
	"encoding/json"
	"reflect"
	"testing"
)

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
