package users

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type usersImportOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer
	Open    cmdutil.OpenFunc
	ErrOut  io.Writer // the progress bar
	Now     func() time.Time

	Resource string
	File     string // - for standard input
}

func newCmdUsersImport(f *cmdutil.Factory, runF func(context.Context, *usersImportOptions) error) *cobra.Command {
	opts := &usersImportOptions{Connect: f.Connect, Printer: f.Printer, Open: f.Open, ErrOut: f.ErrOut, Now: time.Now}
	return &cobra.Command{
		Use:   "import RESOURCE FILE.csv",
		Short: "Add users with their limits from a CSV file, in bulk (idempotent)",
		Long: `Import users and their limits from a CSV file (- for standard input): one user a
line, KEY[,LIMIT]. An empty or missing LIMIT means the resource's default
limit. A first line "key,limit" (or "key" alone) is a header and is skipped;
lines starting with # are comments. Keys follow the key rule (tblimit users
--help): a key with white space at either end is an error, not trimmed.

  key,limit
  alice,100
  bob,250
  carol

The whole file is checked before anything is written: a malformed line, a
bad limit or a key that appears twice is an error naming the line, and
nothing is imported. Users are then sent in batches of up to 8189 events.

Importing is idempotent: users that exist with the limit in the file are left
alone, users with another limit get the file's limit (as set-limit would),
and re-running an import that was interrupted completes it. A progress bar
is drawn on a terminal; a summary is printed at the end.`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Resource, opts.File = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return usersImportRun(cmd.Context(), opts)
		},
	}
}

func usersImportRun(ctx context.Context, opts *usersImportOptions) error {
	name, in, closeIn, err := opts.Open(opts.File)
	if err != nil {
		return err
	}
	defer closeIn()
	rows, err := parseUsersCSV(name, in)
	if err != nil {
		return err
	}
	start := opts.Now()
	sum := ImportJSON{File: name, Users: len(rows)}
	err = cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) error {
		sum.Resource = r.Name
		existing, err := c.Users(ctx, r)
		if err != nil {
			return err
		}
		limits := make(map[ledger.ID]uint64, len(existing))
		for _, u := range existing {
			limits[u.ID] = u.Limit
		}
		todo := make([]ledger.UserLimit, 0, len(rows))
		for _, row := range rows {
			limit := r.DefaultLimit
			if row.limit != nil {
				limit = *row.limit
			}
			old, ok := limits[ledger.UserID(r.Ledger, row.key)]
			switch {
			case !ok:
				sum.Added++
			case old != limit:
				sum.Changed++
			default:
				sum.Unchanged++
				continue
			}
			todo = append(todo, ledger.UserLimit{Key: row.key, Limit: limit})
		}
		bar := cmdutil.NewProgress(opts.ErrOut, "importing "+r.Name, len(todo))
		defer bar.Finish()
		return cmdutil.Provision(ctx, c, r, todo, func(i, j int, err error) error {
			if err != nil {
				return fmt.Errorf("importing %s (users %d to %d of %d to write; %d written before; run the import again to complete it): %w",
					name, i+1, j, len(todo), i, err)
			}
			bar.Set(j)
			return nil
		})
	})
	if err != nil {
		return err
	}
	took := opts.Now().Sub(start)
	sum.Seconds = took.Seconds()
	p := opts.Printer()
	return p.Emit(sum, func() {
		p.Printf("imported %s into %s: %s, %d added, %d changed, %d unchanged in %s\n",
			name, sum.Resource, cmdutil.Plural(sum.Users, "user"), sum.Added, sum.Changed, sum.Unchanged, cmdutil.Human(took))
	})
}

// csvUser is one line of an import file.
type csvUser struct {
	key   string
	limit *uint64 // nil: the resource's default
	line  int
}

// parseUsersCSV reads and checks a whole import file; errors name the file
// and line. A UTF-8 byte order mark at the start, as spreadsheet programs
// write, is skipped.
func parseUsersCSV(name string, in io.Reader) ([]csvUser, error) {
	r := csv.NewReader(skipBOM(in))
	r.FieldsPerRecord = -1
	r.Comment = '#'
	r.ReuseRecord = true
	var out []csvUser
	seen := make(map[string]int)
	for first := true; ; first = false {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("%s:%d: %v", name, pe.Line, pe.Err)
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := r.FieldPos(0)
		if first && isHeader(rec) {
			continue
		}
		if len(rec) > 2 {
			return nil, fmt.Errorf("%s:%d: %d fields, want KEY[,LIMIT]", name, line, len(rec))
		}
		key, err := ledger.NormalizeKey(rec[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		u := csvUser{key: key, line: line}
		if len(rec) == 2 && strings.TrimSpace(rec[1]) != "" {
			n, err := cmdutil.ParseLimit(strings.TrimSpace(rec[1])) // a spreadsheet's "alice, 10"
			if err != nil {
				return nil, fmt.Errorf("%s:%d: limit %w", name, line, err)
			}
			u.limit = &n
		}
		if prev, dup := seen[u.key]; dup {
			return nil, fmt.Errorf("%s:%d: user %q is also on line %d", name, line, u.key, prev)
		}
		seen[u.key] = line
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no users", name)
	}
	return out, nil
}

// isHeader reports whether the first record of a file is its header: key
// (or user), alone or followed by limit. A first line with anything else in
// its second field (a limit, or nothing) is a user, even one named key or
// user, which must not be skipped as a header.
func isHeader(rec []string) bool {
	name := func(i int) string { return strings.ToLower(strings.TrimSpace(rec[i])) }
	switch {
	case len(rec) == 0 || (name(0) != "key" && name(0) != "user"):
		return false
	case len(rec) == 1:
		return true
	}
	return len(rec) == 2 && name(1) == "limit"
}

// utf8BOM is the UTF-8 encoding of U+FEFF, the byte order mark.
const utf8BOM = "\ufeff"

// skipBOM returns in without a byte order mark at its start.
func skipBOM(in io.Reader) io.Reader {
	br := bufio.NewReader(in)
	if b, err := br.Peek(len(utf8BOM)); err == nil && string(b) == utf8BOM {
		_, _ = br.Discard(len(utf8BOM))
	}
	return br
}

// ImportJSON is the summary of users import.
type ImportJSON struct {
	Resource  string  `json:"resource"`
	File      string  `json:"file"`
	Users     int     `json:"users"`     // rows in the file
	Added     int     `json:"added"`     // users created
	Changed   int     `json:"changed"`   // existing users whose limit was changed
	Unchanged int     `json:"unchanged"` // existing users that already had their limit
	Seconds   float64 `json:"seconds"`
}
