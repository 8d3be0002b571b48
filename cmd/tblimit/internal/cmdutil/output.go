package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tblimit/tblimit/ledger"

	"golang.org/x/term"
)

// Printer writes a command's result on standard output: JSON with -o json;
// otherwise text, with tables, headers and colours only on a terminal (off
// a terminal, tables are tab-separated lines without a header, for scripts).
type Printer struct {
	w     io.Writer
	json  bool
	TTY   bool
	color bool
}

// NewPrinter returns a printer on w: JSON if asJSON, text otherwise.
func NewPrinter(w io.Writer, asJSON bool) *Printer {
	tty := isTerminal(w)
	return &Printer{
		w:     w,
		json:  asJSON,
		TTY:   tty,
		color: tty && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb",
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Emit prints v as JSON, or calls text. In JSON an empty list is [], never
// null, whichever command built v and however.
func (p *Printer) Emit(v any, text func()) error {
	if !p.json {
		text()
		return nil
	}
	enc := json.NewEncoder(p.w)
	if p.TTY {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(noNullLists(reflect.ValueOf(v)).Interface())
}

// noNullLists returns a copy of v in which every nil slice is empty, so that
// encoding/json writes it as [] (a script reading "changes" or "addresses"
// then needs no special case). v itself is left alone.
func noNullLists(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Slice:
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(noNullLists(v.Index(i)))
		}
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if f := out.Field(i); f.CanSet() {
				f.Set(noNullLists(v.Field(i)))
			}
		}
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(noNullLists(v.Elem()))
		return out
	}
	return v
}

// Printf prints text, formatted as fmt.Printf does.
func (p *Printer) Printf(format string, args ...any) { fmt.Fprintf(p.w, format, args...) }

// Table prints rows under a header: aligned on a terminal, tab-separated
// without the header elsewhere.
func (p *Printer) Table(header []string, rows [][]string) {
	if !p.TTY {
		for _, r := range rows {
			fmt.Fprintln(p.w, strings.Join(r, "\t"))
		}
		return
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	head, body, _ := strings.Cut(b.String(), "\n")
	fmt.Fprintf(p.w, "%s\n%s", p.Paint(bold, strings.TrimRight(head, " ")), body)
}

// Fields prints name/value pairs, one a line.
func (p *Printer) Fields(pairs [][2]string) {
	if !p.TTY {
		for _, kv := range pairs {
			fmt.Fprintf(p.w, "%s\t%s\n", kv[0], kv[1])
		}
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	for _, kv := range pairs {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	tw.Flush()
}

const (
	bold  = "1"
	Red   = "31"
	Green = "32"
	Amber = "33"
)

// Paint colours s on a colour terminal.
func (p *Printer) Paint(color, s string) string {
	if !p.color {
		return s
	}
	return "\x1b[" + color + "m" + s + "\x1b[0m"
}

// Seconds converts a duration to fractional seconds for JSON.
// seconds is d in seconds for JSON, to the microsecond: no float noise
// (1.921992, not 1.9219921709999999).
func Seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1e6) / 1e6 }

// Human prints a duration for people, rounded to the millisecond, in the
// form windows are written ("1d", "23h59m59.993s").
func Human(d time.Duration) string { return ledger.FormatWindow(d.Round(time.Millisecond)) }

// Progress draws a progress bar on a terminal; elsewhere it does nothing.
type Progress struct {
	w     io.Writer
	on    bool
	total int
	what  string
	last  time.Time
}

// NewProgress returns the progress bar of total steps of what, drawn on w.
func NewProgress(w io.Writer, what string, total int) *Progress {
	return &Progress{w: w, on: isTerminal(w) && total > 0, what: what, total: total}
}

// Set draws done steps of the total, at most every 100 ms.
func (p *Progress) Set(done int) {
	if !p.on || (done < p.total && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	const width = 30
	filled := width * done / p.total
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%% %d/%d", p.what, strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		100*done/p.total, done, p.total)
}

// Finish clears the bar.
func (p *Progress) Finish() {
	if p.on {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// Plural is n and what, with an s unless n is 1: "1 user", "3 users".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// U64 is n in decimal.
func U64(n uint64) string { return strconv.FormatUint(n, 10) }

// SecondsDuration is the duration of s seconds, as the JSON gives it.
func SecondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
