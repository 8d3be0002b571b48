package yamlpos

import (
	"errors"
	"io/fs"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestFaultLine(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want int
	}{
		{"a: [\n", 1},
		{"a: 1\nb: 2\n c: 3\n", 3},
		{"a: 1\nb:\n  - x\n - y\n", 4},
		{"a: 1\nb: 'x\nc: 2\n", 2}, // an unclosed quote: where it opens, not the end of the file
		{"a: 1\n---\nb: [\n", 3},   // a later document counts
		{"a: 1\rb: 2\r c: 3\r", 3},
		{"a: 1\n", 1}, // parses whole: the last line
	} {
		if got := FaultLine([]byte(c.yaml)); got != c.want {
			t.Errorf("FaultLine(%q) = %d, want %d", c.yaml, got, c.want)
		}
	}
}

func TestLines(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want int
	}{
		{"", 1},
		{"a", 1},
		{"a\n", 1},
		{"a\nb", 2},
		{"a\rb\r\nc\u0085d\u2028e\u2029f\ng", 7},
	} {
		if got := Lines([]byte(c.yaml)); got != c.want {
			t.Errorf("Lines(%q) = %d, want %d", c.yaml, got, c.want)
		}
	}
}

// Lines counts the lines yaml.v3 does: the last node of a file is on its
// last line, whatever breaks its lines.
func TestLinesAsYAMLCounts(t *testing.T) {
	for _, src := range []string{"a: 1\nb: 2", "a: 1\rb: 2", "a: 1\r\nb: 2\r\n", "a: 1\u2028b: 2", "a: 1\u0085\u0085b: 2\n"} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
			t.Fatalf("yaml.Unmarshal(%q) = %v", src, err)
		}
		m := doc.Content[0]
		if last := m.Content[len(m.Content)-1]; last.Line != Lines([]byte(src)) {
			t.Errorf("Lines(%q) = %d, want %d, the line yaml puts its last node on", src, Lines([]byte(src)), last.Line)
		}
	}
}

func TestSyntax(t *testing.T) {
	src := []byte("a: 1\nb:\n  - x\n - y\n")
	var doc yaml.Node
	yerr := yaml.Unmarshal(src, &doc)
	if yerr == nil {
		t.Fatal("yaml.Unmarshal of a bad indentation = nil error")
	}
	if got, want := Syntax("f.yaml", src, yerr).Error(), "f.yaml:4: did not find expected key"; got != want {
		t.Errorf("Syntax(%v) = %q, want %q", yerr, got, want)
	}
	if err := Syntax("f.yaml", src, nil); err != nil {
		t.Errorf("Syntax(nil) = %v, want nil", err)
	}
}

func TestAt(t *testing.T) {
	n := &yaml.Node{Line: 7, Column: 3}
	err := At("f.yaml", n, "limit %d: %w", 5, fs.ErrInvalid)
	if got, want := err.Error(), "f.yaml:7: limit 5: invalid argument"; got != want {
		t.Errorf("At(line 7) = %q, want %q", got, want)
	}
	var pe *Error
	if !errors.Is(err, fs.ErrInvalid) || !errors.As(err, &pe) || pe.Line != 7 || pe.File != "f.yaml" {
		t.Errorf("At(line 7) = %#v, want an *Error at f.yaml:7 wrapping fs.ErrInvalid", err)
	}
	if got, want := At("f.yaml", nil, "empty").Error(), "f.yaml: empty"; got != want {
		t.Errorf("At(nil) = %q, want %q", got, want)
	}
}

// A file holds nothing when it has no document or an empty one; a null
// written out, or anything else, is something.
func TestEmpty(t *testing.T) {
	for src, want := range map[string]bool{
		"": true, "# c\n": true, "---": true, "---\n": true, "# c\n---\n# d\n": true,
		"~": false, "null": false, "---\n~\n": false, "''": false, "a: b": false, "[]": false,
	} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if got := Empty(&doc); got != want {
			t.Errorf("Empty(%q) = %v, want %v", src, got, want)
		}
	}
}
