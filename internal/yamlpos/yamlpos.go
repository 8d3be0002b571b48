// Package yamlpos names where in a YAML file a problem is, as file:line.
//
// The YAML readers of tblimit (apply's files, the rate limit service's
// configuration) report every problem through it, so that the same fault
// in the same file is named on the same line by both: At for a node that
// is wrong, Syntax for a file that does not parse.
package yamlpos

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is a problem at a line of a YAML file. Its text is
// "file:line: problem", or "file: problem" when Line is 0.
type Error struct {
	File string
	// Line counts from 1, as yaml.v3 counts the lines of its nodes (see
	// Lines); 0 is the file as a whole.
	Line int
	Err  error
}

func (e *Error) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// At returns the problem format and args describe (as fmt.Errorf does,
// %w included) at node n of file; a nil n is the file as a whole.
func At(file string, n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return AtLine(file, line, format, args...)
}

// AtLine is At for a line kept apart from its node.
func AtLine(file string, line int, format string, args ...any) error {
	return &Error{File: file, Line: line, Err: fmt.Errorf(format, args...)}
}

// Syntax returns err, the error yaml.v3 returned reading data, as a
// problem at the line that stops data from parsing (see FaultLine), with
// yaml's own prefix and line taken out of its text. A nil err is nil.
func Syntax(file string, data []byte, err error) error {
	if err == nil {
		return nil
	}
	return &Error{File: file, Line: FaultLine(data), Err: errors.New(problem(err))}
}

// problem is yaml's description of a syntax error, without its package
// prefix and the line it names. The text is only printed.
func problem(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if _, after, ok := strings.Cut(rest, ": "); ok {
			return after
		}
	}
	return msg
}

// FaultLine returns the line of a YAML file that stops it from parsing:
// the first line whose prefix of the file no longer parses, when every
// shorter one does (every document of it, not only the first).
//
// yaml.v3 names the line where the enclosing block starts (its "context
// mark"), often line 1 for a fault on line 5, or the end of the file, and
// its errors carry no position we could read; so the line is found here,
// by parsing prefixes of the file, in a binary search (about log2(lines)
// parses). A flow collection or a quoted string spanning several lines can
// make it name the line where that starts. A file that parses whole is
// given its last line.
func FaultLine(data []byte) int {
	ends := lineEnds(data)
	parses := func(lines int) bool {
		end := 0
		if lines > 0 {
			end = ends[lines-1]
		}
		dec := yaml.NewDecoder(bytes.NewReader(data[:end]))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err != nil {
				return errors.Is(err, io.EOF)
			}
		}
	}
	ok, bad := 0, len(ends) // the first ok lines parse; the first bad lines do not
	for bad-ok > 1 {
		if mid := (ok + bad) / 2; parses(mid) {
			ok = mid
		} else {
			bad = mid
		}
	}
	return max(bad, 1)
}

// Empty reports whether doc, a file parsed into a yaml.Node, holds
// nothing: no document (a file of comments), or an empty one (a document
// marker, "---", alone), whose node yaml places on the line after the
// marker, past the file's last, so that no error should name its line.
// A null written as null or ~ is not nothing.
func Empty(doc *yaml.Node) bool {
	if len(doc.Content) == 0 {
		return true
	}
	n := doc.Content[0]
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == "" && n.Style == 0
}

// Lines returns how many lines data has, as yaml.v3 counts them in the
// positions of its nodes: the last one counts though no line break ends
// it, and an empty file has one.
func Lines(data []byte) int { return len(lineEnds(data)) }

// lineEnds returns the offset just past each line of a YAML file, its
// last line included. Lines end where YAML says they do: at \n, \r\n, a
// lone \r, U+0085, U+2028 or U+2029; so the lines counted here are the ones
// yaml counts in the positions of the nodes that other errors name.
func lineEnds(data []byte) []int {
	var ends []int
	for i := 0; i < len(data); {
		n := lineBreak(data[i:])
		if n == 0 {
			i++
			continue
		}
		i += n
		ends = append(ends, i)
	}
	if len(ends) == 0 || ends[len(ends)-1] < len(data) {
		ends = append(ends, len(data))
	}
	return ends
}

// lineBreak returns the length of the YAML line break data starts with, or 0.
func lineBreak(data []byte) int {
	for _, br := range []string{"\r\n", "\r", "\n", "\u0085", "\u2028", "\u2029"} {
		if bytes.HasPrefix(data, []byte(br)) {
			return len(br)
		}
	}
	return 0
}
