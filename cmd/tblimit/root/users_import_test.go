package root

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/cmd/tblimit/users"
)

// writeUsersCSV writes n users u0..u(n-1) with limit i%100+1 (and every
// tenth without a limit: the default).
func writeUsersCSV(t testing.TB, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.csv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "key,limit")
	for i := range n {
		if i%10 == 9 {
			fmt.Fprintf(w, "u%d\n", i)
		} else {
			fmt.Fprintf(w, "u%d,%d\n", i, i%100+1)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantLimit is the limit writeUsersCSV gives user i, with default limit 1000.
func wantLimit(i int) uint64 {
	if i%10 == 9 {
		return 1000
	}
	return uint64(i%100 + 1)
}

// checkImported checks that the resource holds exactly the n users of
// writeUsersCSV with their limits.
func checkImported(t *testing.T, e *cliEnv, resource string, n int) {
	t.Helper()
	var list users.ListJSON
	e.json(cmdutil.ExitOK, &list, "users", "list", resource)
	if len(list.Users) != n {
		t.Fatalf("%d users, want %d", len(list.Users), n)
	}
	seen := make(map[string]bool, n)
	for _, u := range list.Users {
		var i int
		if _, err := fmt.Sscanf(u.User, "u%d", &i); err != nil || seen[u.User] {
			t.Fatalf("unexpected or repeated user %+v", u)
		}
		seen[u.User] = true
		if u.Limit != wantLimit(i) || u.InFlight != 0 {
			t.Fatalf("user %s: limit %d, %d in flight; want %d, 0", u.User, u.Limit, u.InFlight, wantLimit(i))
		}
	}
}

func TestImportIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "1000")
	const n = 20_000 // more than two batches
	csv := writeUsersCSV(t, n)
	var sum users.ImportJSON
	e.json(cmdutil.ExitOK, &sum, "users", "import", "api", csv)
	if sum.Users != n || sum.Added != n || sum.Changed != 0 || sum.Unchanged != 0 {
		t.Fatalf("first import = %+v, want %d added", sum, n)
	}
	e.json(cmdutil.ExitOK, &sum, "users", "import", "api", csv)
	if sum.Added != 0 || sum.Changed != 0 || sum.Unchanged != n {
		t.Fatalf("second import = %+v, want all %d unchanged", sum, n)
	}
	// Users whose limit differs get the file's; text output ends with the summary.
	e.ok("users", "set-limit", "api", "u0", "77")
	r := e.runIn("key,limit\nu0,1\nu1,9\nnew,3\n", "users", "import", "api", "-")
	if r.code != cmdutil.ExitOK || !strings.HasPrefix(r.stdout, "imported stdin into api: 3 users, 1 added, 2 changed, 0 unchanged in ") || r.stderr != "" {
		t.Fatalf("import from stdin = %d %q %q", r.code, r.stdout, r.stderr)
	}
	var u users.UserJSON
	e.json(cmdutil.ExitOK, &u, "users", "show", "api", "u1")
	if u.Limit != 9 {
		t.Fatalf("u1 = %+v, want limit 9", u)
	}
	e.ok("users", "set-limit", "api", "u1", "2")
	e.ok("users", "set-limit", "api", "new", "1000")
	e.ok("users", "set-limit", "api", "u0", "1")
	e.ok("users", "import", "api", csv)
	var list users.ListJSON
	e.json(cmdutil.ExitOK, &list, "users", "list", "api")
	if len(list.Users) != n+1 {
		t.Fatalf("%d users, want %d", len(list.Users), n+1)
	}
}

func TestImportMoneyOpensCurrencyAccounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000")
	const n = 5000 // more than one money batch (4094 users)
	e.ok("users", "import", "usd", writeUsersCSV(t, n))
	checkImported(t, e, "usd", n)
	e.ok("fund", "usd", "u4999", "10")
	e.code(cmdutil.ExitOK, "pay", "usd", "u4999", "u0", "10")
}

// TestImportSurvivesKill kills tblimit (this test binary, re-executed as
// the command) with SIGKILL in the middle of an import several times; the
// data file must open every time, and importing again must complete with
// exactly the right users and limits.
func TestImportSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the kill -9 test")
	}
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "1000")
	const n = 40_000
	csv := writeUsersCSV(t, n)
	size := func() int64 {
		st, err := os.Stat(e.data)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	// How far each run gets before it is killed, in bytes it wrote: as
	// soon as it writes, and about one, two and three batches on. The
	// data file does not tell: its journal writes over the space it has.
	killAfter := []int64{1, 1 << 20, 2<<20 + 300<<10, 3<<20 + 700<<10}
	checkedBusy := false
	for round, after := range killAfter {
		start := size()
		cmd := exec.Command(os.Args[0], "--data", e.data, "users", "import", "api", csv)
		cmd.Env = append(os.Environ(), envMain+"=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		finished := false
	wait:
		for written(cmd.Process.Pid) < after {
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("round %d: import exited by itself: %v\n%s", round, err, stderr.String())
				}
				finished = true
				break wait
			case <-time.After(200 * time.Microsecond):
			}
		}
		if finished {
			t.Logf("round %d: the import finished before the kill", round)
			break
		}
		if !checkedBusy {
			// The import holds the data file: another command is refused.
			r := e.run("users", "show", "api", "u0")
			if r.code != cmdutil.ExitError || !strings.Contains(r.stderr, "is in use by another process") {
				t.Fatalf("a command during the import = %d %q, want the data file in use", r.code, r.stderr)
			}
			checkedBusy = true
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		<-exited
		r := e.run("resources", "show", "api")
		if r.code != cmdutil.ExitOK {
			t.Fatalf("round %d: after kill -9 at %d bytes the data file does not open: %s", round, size(), r.stderr)
		}
		t.Logf("round %d: killed once it had written %d bytes or more, the data file %d bytes longer; %s", round, after, size()-start, strings.TrimSpace(r.stderr))
	}
	if !checkedBusy {
		t.Fatalf("no import was killed while running")
	}
	var sum users.ImportJSON
	e.json(cmdutil.ExitOK, &sum, "users", "import", "api", csv)
	if sum.Users != n || sum.Added+sum.Changed+sum.Unchanged != n || sum.Unchanged == 0 {
		t.Fatalf("import after the kills = %+v, want %d users, some already imported", sum, n)
	}
	t.Logf("import after the kills: %d added, %d changed, %d already there", sum.Added, sum.Changed, sum.Unchanged)
	checkImported(t, e, "api", n)
	e.json(cmdutil.ExitOK, &sum, "users", "import", "api", csv)
	if sum.Unchanged != n {
		t.Fatalf("import again = %+v, want all unchanged", sum)
	}
}

// written returns how many bytes process pid has written (Linux's
// /proc/pid/io), or, where that cannot be read, an ever larger number, so
// that a kill comes at once.
func written(pid int) int64 {
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return math.MaxInt64
	}
	for line := range strings.Lines(string(io)) {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return math.MaxInt64
}

// TestImport100kUsers measures a 100,000-user import on the embedded
// engine, as a user runs it (a data file on disk, fsync per request). It
// logs the time; it asserts none.
func TestImport100kUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 100k import")
	}
	e := newRealTimeEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "1000")
	const n = 100_000
	csv := writeUsersCSV(t, n)
	start := time.Now()
	var sum users.ImportJSON
	e.json(cmdutil.ExitOK, &sum, "users", "import", "api", csv)
	took := time.Since(start)
	if sum.Added != n {
		t.Fatalf("import = %+v", sum)
	}
	start = time.Now()
	e.json(cmdutil.ExitOK, &sum, "users", "import", "api", csv)
	again := time.Since(start)
	st, _ := os.Stat(e.data)
	t.Logf("imported %d users in %v (re-run, all unchanged: %v); data file %d bytes", n, took, again, st.Size())
}

func BenchmarkImport100kUsers(b *testing.B) {
	csv := writeUsersCSV(b, 100_000)
	for b.Loop() {
		b.StopTimer()
		data := filepath.Join(b.TempDir(), "data.journal")
		run := func(args ...string) {
			var out, errb strings.Builder
			if code := Run(b.Context(), append([]string{"--data", data}, args...), strings.NewReader(""), &out, &errb); code != cmdutil.ExitOK {
				b.Fatalf("%v: %d %s", args, code, errb.String())
			}
		}
		run("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "1000")
		b.StartTimer()
		run("users", "import", "api", csv)
	}
}

// A CSV file as spreadsheet programs save it, with a UTF-8 byte order mark
// and CRLF line ends, imports.
func TestImportCSVWithBOM(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "1000")
	for i, content := range []string{"\ufeffkey,limit\r\nalice,10\r\nbob,\r\n", "\ufeffcarol,7\n"} {
		csv := filepath.Join(t.TempDir(), "excel.csv")
		if err := os.WriteFile(csv, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		var sum users.ImportJSON
		e.json(cmdutil.ExitOK, &sum, "users", "import", "api", csv)
		if sum.Users != 2-i || sum.Added != 2-i {
			t.Fatalf("import %q = %+v, want %d added", content, sum, 2-i)
		}
	}
	var list users.ListJSON
	e.json(cmdutil.ExitOK, &list, "users", "list", "api")
	got := map[string]uint64{}
	for _, u := range list.Users {
		got[u.User] = u.Limit
	}
	if len(got) != 3 || got["alice"] != 10 || got["bob"] != 1000 || got["carol"] != 7 {
		t.Errorf("users = %v, want alice 10, bob 1000 (the default), carol 7", got)
	}
}
