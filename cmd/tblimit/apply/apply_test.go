package apply

import (
	"errors"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/internal/yamlpos"
	"github.com/tblimit/tblimit/service/ratelimit"
)

// A YAML syntax error names the line of the fault, not the line where the
// enclosing block starts (yaml.v3 says line 1 for most of these).
func TestApplyYAMLErrorLines(t *testing.T) {
	const head = "resources:\n  - name: api\n    kind: requests\n    ledger: 1\n" // lines 1-4
	for _, c := range []struct {
		name, yaml string
		want       string
	}{
		{"indentation", head + "   window: 1m\n    default_limit: 5\n", "l.yaml:5: did not find expected '-' indicator"},
		{"a list item in a mapping", head + "    - window: 1m\n    default_limit: 5\n", "l.yaml:5: did not find expected key"},
		{"an unclosed flow list", head + "    window: [1m\n    default_limit: 5\n", "l.yaml:5: "},
		{"an unclosed quote", head + "    window: \"1m\n    default_limit: 5\n", "l.yaml:5: "},
		{"a colon in a value", head + "    window: 1m: 2\n    default_limit: 5\n", "l.yaml:5: mapping values are not allowed"},
		{"a tab", head + "    window: 1m\n\tdefault_limit: 5\n", "l.yaml:6: "},
		{"the second resource", head + "    window: 1m\n    default_limit: 5\n  - name: b\n    kind: bytes\n   ledger: 2\n", "l.yaml:9: "},
		{"the second document", head + "    window: 1m\n    default_limit: 5\n---\na: [\n", "l.yaml:8: "},
		{"the first line", "resources: [\n", "l.yaml:1: "},
		{"no newline at the end", head + "   window: 1m", "l.yaml:5: "},
		{"with a byte order mark", "\ufeff" + head + "   window: 1m\n", "l.yaml:5: "},
	} {
		_, err := parseApplyFile("l.yaml", strings.NewReader(c.yaml))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "yaml: ") {
			t.Errorf("%s: error %v, want it to start with %q", c.name, err, c.want)
		}
	}
}

// Lines end where YAML says they do, so that a syntax error (found by
// yamlpos.FaultLine) and any other error (a node's position in yaml) count
// the same lines, also in files with lone carriage returns. (Found by
// FuzzParseApplyFile: "\r0" named line 2 of what was one line to the search
// for the fault.)
func TestApplyLineEndings(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       string
	}{
		{"CR", "resources:\r  - name: api\r   kind: requests\r", "l.yaml:3: "},
		{"CRLF", "resources:\r\n  - name: api\r\n   kind: requests\r\n", "l.yaml:3: "},
		{"LS", "resources:\u2028  - name: api\u2028   kind: requests\n", "l.yaml:3: "},
		{"CR, a bad value", "resources:\r  - {name: api, kind: requests, ledger: 1, window: 0s, default_limit: 1}\r", "l.yaml:2: window"},
		{"CR, not a mapping", "\r0", "l.yaml:2: want a mapping"},
	} {
		_, err := parseApplyFile("l.yaml", strings.NewReader(c.yaml))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to start with %q", c.name, err, c.want)
		}
	}
}

// A value of the wrong kind is named on its own line, not on that of the
// mapping holding it.
func TestApplyFieldLines(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       string
	}{
		{"resources not a list", "# limits\nresources: 5\n", "l.yaml:2: want a resources: list"},
		{"resources empty", "# limits\nresources:\n", "l.yaml:2: want a resources: list"},
		{"resources twice", "resources: []\nresources: []\n", "l.yaml:2: resources is given twice"},
		{"no resources", "# limits\n{}\n", "l.yaml:2: want a resources: list"},
	} {
		_, err := parseApplyFile("l.yaml", strings.NewReader(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

func TestApplyParsing(t *testing.T) {
	cmdtest.CheckParse(t, NewCmdApply, []cmdtest.ParseCase[applyOptions]{
		{Args: []string{"-f", "limits.yaml"}, Want: applyOptions{File: "limits.yaml"}},
		{Args: []string{"--file", "-", "--dry-run"}, Want: applyOptions{File: "-", DryRun: true}},
		{Args: []string{}, Err: "-f/--file is required"},
		{Args: []string{"limits.yaml"}, Err: `unknown command "limits.yaml"`},
	})
}

// apply's files and the rate limit service's configuration are read by two
// parsers; the same fault in the same file is named on the same line by
// both, through yamlpos (0: the file as a whole).
func TestYAMLLinesAgreeWithRatelimit(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		line       int
	}{
		{"an indentation", "# limits\nresources:\n  - name: api\n    kind: requests\n   ledger: 1\n", 5},
		{"a list item dedented", "a: 1\nb:\n  - x\n - y\n", 4},
		{"an unclosed quote", "a: 'x\nb: 2\n", 1},
		{"an unclosed flow list", "a: 1\nb: [\n", 2},
		{"a tab", "a: 1\n\tb: 2\n", 2},
		{"lone carriage returns", "a: 1\rb:\r  - x\r - y\r", 4},
		{"a colon in a value", "a: 1\nb: c: d\n", 2},
		{"an unknown key", "# c\n\nbogus: 1\n", 3},
		{"not a mapping", "# c\n\n- a\n", 3},
		{"empty", "", 0},
		{"only a comment", "# nothing\n", 0},
	} {
		_, applyErr := parseApplyFile("f.yaml", strings.NewReader(c.yaml))
		_, rlErr := ratelimit.ParseConfig([]string{"f.yaml"}, map[string][]byte{"f.yaml": []byte(c.yaml)})
		for _, e := range []struct {
			parser string
			err    error
		}{{"parseApplyFile", applyErr}, {"ratelimit.ParseConfig", rlErr}} {
			var pe *yamlpos.Error
			if !errors.As(e.err, &pe) || pe.File != "f.yaml" || pe.Line != c.line {
				t.Errorf("%s: %s = %v, want an error at f.yaml line %d", c.name, e.parser, e.err, c.line)
			}
		}
	}
}
