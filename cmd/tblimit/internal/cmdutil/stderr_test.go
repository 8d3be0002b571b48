//go:build unix

package cmdutil

import (
	"bytes"
	"strings"
	"testing"
)

func TestStderrFilterDropsOnlyTheClientsLines(t *testing.T) {
	t.Parallel()
	in := "warning(message_bus): 123: on_connect: error to=0 error.ConnectionRefused\n" +
		"info(message_bus): 123: connected\n" +
		"error(message_bus): 123: something else\n" +
		"panic: runtime error\n" +
		"warning(io): not the message bus\n" +
		"no newline at the end"
	want := "error(message_bus): 123: something else\npanic: runtime error\nwarning(io): not the message bus\nno newline at the end"
	var f stderrFilter
	var out bytes.Buffer
	f.copy(strings.NewReader(in), &out)
	if out.String() != want {
		t.Errorf("filtered:\n%q\nwant\n%q", out.String(), want)
	}
	f.keepAll()
	out.Reset()
	f.copy(strings.NewReader(in), &out)
	if out.String() != in {
		t.Errorf("with keepAll:\n%q\nwant everything", out.String())
	}
}
