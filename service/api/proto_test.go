package api_test

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
)

// The generated code is what proto/tblimit/v1/tblimit.proto declares:
// every message, field (name and number), enum value and method of the
// file is in the descriptor compiled into api/tblimit/v1, and nothing
// else is. It catches a .proto changed without running
// scripts/gen-proto.sh, without buf; scripts/gen-proto.sh --check compares
// the generated files themselves.
func TestGeneratedCodeMatchesProto(t *testing.T) {
	f, err := os.Open("../../proto/tblimit/v1/tblimit.proto")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		block   = regexp.MustCompile(`^(message|enum|service) (\w+) \{`)
		field   = regexp.MustCompile(`^(?:repeated |optional )?[\w.]+ (\w+) = (\d+);`)
		value   = regexp.MustCompile(`^([A-Z_0-9]+) = (\d+);`)
		method  = regexp.MustCompile(`^rpc (\w+)\(`)
		in      string // the message, enum or service being read
		fromSrc []string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		m := [][]string{block.FindStringSubmatch(line), field.FindStringSubmatch(line), value.FindStringSubmatch(line), method.FindStringSubmatch(line)}
		switch {
		case m[0] != nil:
			in = m[0][1] + " " + m[0][2]
			fromSrc = append(fromSrc, in)
		case line == "}" || strings.HasSuffix(line, "{}"):
			if strings.HasSuffix(line, "{}") {
				fromSrc = append(fromSrc, "message "+strings.Fields(line)[1])
			}
			in = ""
		case m[1] != nil && strings.HasPrefix(in, "message "):
			fromSrc = append(fromSrc, in+"."+m[1][1]+" = "+m[1][2])
		case m[2] != nil && strings.HasPrefix(in, "enum "):
			fromSrc = append(fromSrc, in+"."+m[2][1]+" = "+m[2][2])
		case m[3] != nil && strings.HasPrefix(in, "service "):
			fromSrc = append(fromSrc, in+"."+m[3][1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	fd := tblimitv1.File_tblimit_v1_tblimit_proto
	var compiled []string
	for i := 0; i < fd.Messages().Len(); i++ {
		m := fd.Messages().Get(i)
		compiled = append(compiled, "message "+string(m.Name()))
		for j := 0; j < m.Fields().Len(); j++ {
			fl := m.Fields().Get(j)
			compiled = append(compiled, "message "+string(m.Name())+"."+string(fl.Name())+" = "+itoa(fl.Number()))
		}
	}
	for i := 0; i < fd.Enums().Len(); i++ {
		e := fd.Enums().Get(i)
		compiled = append(compiled, "enum "+string(e.Name()))
		for j := 0; j < e.Values().Len(); j++ {
			v := e.Values().Get(j)
			compiled = append(compiled, "enum "+string(e.Name())+"."+string(v.Name())+" = "+itoa(v.Number()))
		}
	}
	for i := 0; i < fd.Services().Len(); i++ {
		s := fd.Services().Get(i)
		compiled = append(compiled, "service "+string(s.Name()))
		for j := 0; j < s.Methods().Len(); j++ {
			compiled = append(compiled, "service "+string(s.Name())+"."+string(s.Methods().Get(j).Name()))
		}
	}
	if len(fromSrc) < 50 {
		t.Fatalf("read %d declarations from the .proto: is the parser broken?", len(fromSrc))
	}
	if missing, extra := diff(fromSrc, compiled), diff(compiled, fromSrc); len(missing)+len(extra) > 0 {
		t.Errorf("api/tblimit/v1 is not what the .proto declares (run scripts/gen-proto.sh):\nin the .proto only: %q\nin the generated code only: %q", missing, extra)
	}
}

func itoa[N protoreflect.FieldNumber | protoreflect.EnumNumber](n N) string {
	return strconv.Itoa(int(n))
}

// diff is what a has that b has not.
func diff(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}
