// Package cmdtest helps test the commands of tblimit: their parsing, without I/O.
//
// A command's parsing tests run it with a runF that captures its options, as
// gh's tests do: arguments and flags are checked without a ledger.
package cmdtest

import (
	"context"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

// ParseCmd runs the command newCmd builds on args, with a runF that captures
// its options, under the root's conventions for usage errors. It returns the
// options runF got (nil if it was not called) and the error.
func ParseCmd[T any](t *testing.T, newCmd func(*cmdutil.Factory, func(context.Context, *T) error) *cobra.Command, args ...string) (*T, error) {
	t.Helper()
	var got *T
	f := cmdutil.NewFactory(strings.NewReader(""), io.Discard, io.Discard)
	cmd := newCmd(f, func(_ context.Context, o *T) error { got = o; return nil })
	cmdutil.UsageConventions(cmd)
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return got, cmd.ExecuteContext(t.Context())
}

// inputs returns o without its dependencies (functions and writers), for
// comparing what a command parsed.
func inputs[T any](o *T) T {
	v := *o
	clearDeps(reflect.ValueOf(&v).Elem())
	return v
}

func clearDeps(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Func, reflect.Interface:
			f.SetZero()
		case reflect.Struct:
			clearDeps(f)
		}
	}
}

// ParseCase is one command line and what it must give: the options, or a
// usage error containing err.
type ParseCase[T any] struct {
	Args []string
	Want T
	Err  string
}

// CheckParse runs newCmd's command on each case and checks the options, or
// the usage error, it gives.
func CheckParse[T any](t *testing.T, newCmd func(*cmdutil.Factory, func(context.Context, *T) error) *cobra.Command, cases []ParseCase[T]) {
	t.Helper()
	for _, c := range cases {
		got, err := ParseCmd(t, newCmd, c.Args...)
		switch {
		case c.Err != "":
			if !cmdutil.IsUsage(err) || !strings.Contains(err.Error(), c.Err) || got != nil {
				t.Errorf("%q: options %+v, error %v; want a usage error containing %q", c.Args, got, err, c.Err)
			}
		case err != nil || got == nil:
			t.Errorf("%q: error %v, want options %+v", c.Args, err, c.Want)
		case !reflect.DeepEqual(inputs(got), c.Want):
			t.Errorf("%q: options %+v, want %+v", c.Args, inputs(got), c.Want)
		}
	}
}

// MustID parses an ID, or fails the test.
func MustID(t *testing.T, s string) ledger.ID {
	t.Helper()
	id, err := ledger.ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// fileLine matches an error that names a file and a line.
func fileLine(file string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(file) + `:([0-9]+): `)
}

// CheckNamesLine fails unless err names file and one of its lines (lines
// counted, plus the empty one after the last line break), or is one of the
// errors about the file as a whole.
func CheckNamesLine(t *testing.T, file string, lines int, err error, whole ...string) {
	t.Helper()
	if slices.Contains(whole, err.Error()) {
		return
	}
	m := fileLine(file).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q does not name %s:LINE", err, file)
	}
	if n, _ := strconv.Atoi(m[1]); n < 1 || n > lines+1 {
		t.Fatalf("error %q names line %d of a file of %d lines", err, n, lines)
	}
}

// ShortHold takes n units of user on r with a pending transfer of one
// second, as a program that does not keep the window would.
func ShortHold(t *testing.T, engine tb.Client, r ledger.Resource, user string, n uint64) {
	t.Helper()
	res, err := engine.CreateTransfers([]tb.Transfer{{
		ID:              tb.ID(),
		DebitAccountID:  tb.BytesToUint128(ledger.UserID(r.Ledger, user)),
		CreditAccountID: tb.BytesToUint128(ledger.OperatorID(r.Ledger)),
		Amount:          tb.ToUint128(n),
		Timeout:         1,
		Ledger:          r.Ledger,
		Code:            10,
		Flags:           tb.TransferFlags{Pending: true}.ToUint16(),
	}})
	if err != nil || res[0].Status != tb.TransferCreated {
		t.Fatalf("a short hold = %v, %v", res, err)
	}
}
