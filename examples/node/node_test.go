package node_test

import (
	"bufio"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"

	// The test runs a tblimit binary it builds, which go test's cache knows
	// nothing of: linking the CLI into the test binary too makes a change to
	// the server's code run the test again rather than report a cached pass.
	_ "github.com/tblimit/tblimit/cmd/tblimit/root"
)

// The Node example, run against a tblimit serve --api of its own on the
// embedded default: it provisions a merchant while serve runs, pays under
// request IDs with a retry, reserves and commits, and switches on error
// reasons. It needs node and npm (CI installs them); without them it skips.
func TestNodeExample(t *testing.T) {
	example := install(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "tblimit")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/tblimit/tblimit/cmd/tblimit").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tokens := filepath.Join(dir, "tokens.yaml")
	src := "tokens:\n  - {name: payments, token: n0de-example, allow: {admin: \"*\", fund: \"*\", decide: \"*\", read: \"*\"}}\n"
	if err := os.WriteFile(tokens, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startServe(t, bin, "--data", filepath.Join(dir, "data.journal"), "serve", "--api", "--api-tokens", tokens,
		"--require-request-id", "--grpc-addr", "127.0.0.1:0", "--http-addr", "")

	out := runNode(t, example, "main.mjs", "TBLIMIT_ADDR="+addr, "TBLIMIT_TOKEN=n0de-example", "TBLIMIT_RUN=test")
	for _, want := range []string{
		"acquire 5: allowed false (REASON_LIMIT_EXCEEDED)",
		"paid 12500 once (sent twice)",
		"captured 7450",
		"Pay refused: ALREADY_EXISTS REQUEST_ID_REUSED",
		"Pay refused: NOT_FOUND UNKNOWN_USER",
		"Commit refused: FAILED_PRECONDITION RESERVATION_ENDED",
		"\nok\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("node main.mjs printed no %q:\n%s", want, out)
		}
	}

	// What the cluster holds, read from Go: the payment sent twice and the
	// capture, each once.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer n0de-example")
	cl := tblimitv1.NewLimitServiceClient(conn)
	for user, want := range map[string]uint64{"merchant-test": 12500 + 7450, "alice-test": 500000 - 12500 - 7450} {
		u, err := cl.GetUser(ctx, &tblimitv1.GetUserRequest{Resource: "usd-day", User: user})
		if err != nil || u.GetUser().GetFunds() != want {
			t.Errorf("GetUser(%s) = %v, %v; want funds %d", user, u, err, want)
		}
	}
}

// What README.md says proto-loader's default options do (a dropped
// request_id, {low, high} numbers, enums as numbers, missing zero values)
// and what main.mjs's options give instead: traps.mjs shows each and fails
// when one is not so.
func TestProtoLoaderTraps(t *testing.T) {
	out := runNode(t, install(t), "traps.mjs")
	for _, want := range []string{
		`keepCase: without it, Pay's request_id reaches the server as ""`,
		`longs: without it, a limit of 2^53+1 reads {"low":1,"high":2097152,"unsigned":true}`,
		`enums: without it, a denial's reason reads 2`,
		`defaults: without it, a denial's allowed reads undefined and a zero reset_after {}`,
		`oneofs: with it, a user's funds of 0 read "0" with _funds "funds"; a payment's funds left out read undefined`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("node traps.mjs printed no %q:\n%s", want, out)
		}
	}
}

// install copies the example, and the .proto it loads, into a directory
// of the test's own (their places relative to each other kept), installs
// the packages package-lock.json pins there, and returns the example's
// directory. It skips the test without node and npm on the PATH, under
// -short, and when the npm registry is out of reach and npm's cache lacks
// the packages.
//
// A copy rather than the example in place: the source tree is left as it
// is, two runs do not share a node_modules, and go test's cache knows the
// files the test reads, so that an edit of main.mjs runs the test again.
func install(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: the Node example is not run (.ci/run installs Debian's nodejs and npm)", tool)
		}
	}
	if testing.Short() {
		t.Skip("-short: the Node example installs packages and starts a server")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "examples", "node")
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "node_modules":
			return fs.SkipDir
		case d.IsDir() || strings.HasSuffix(path, ".go"):
			return nil
		}
		return copyFile(path, filepath.Join(dir, path))
	})
	if err == nil {
		err = copyFile("../../proto/tblimit/v1/tblimit.proto", filepath.Join(root, "proto", "tblimit", "v1", "tblimit.proto"))
	}
	if err != nil {
		t.Fatalf("copying the example: %v", err)
	}

	// From npm's cache when it has the packages (--prefer-offline), so that
	// a machine that installed them once needs no registry; without their
	// install scripts, which the example needs none of.
	cmd := exec.CommandContext(t.Context(), "npm", "ci", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		if m := registryOutOfReach.Find(out); m != nil {
			t.Skipf("npm ci: the npm registry is out of reach (%q) and npm's cache lacks the locked packages", m)
		}
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return dir
}

// copyFile copies the file src to dst, making dst's directory.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// registryOutOfReach matches npm's report of a network failure (npm 9
// writes "npm ERR!", later versions "npm error"); any other failure of npm
// ci, a lock that does not match package.json say, fails the test.
var registryOutOfReach = regexp.MustCompile(`npm (ERR!|error) (code (ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|ENOTCACHED)|network .*)`)

// runNode runs node on a script in dir with env added to the test's own
// (less any TBLIMIT_ variables), and returns its output; a failure fails
// the test.
func runNode(t *testing.T, dir, script string, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "node", script)
	cmd.Dir = dir
	cmd.Env = append(environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	return string(out)
}

// environ is the test's environment less the TBLIMIT_ variables, which
// would otherwise reach serve as flags ($TBLIMIT_ADDRESSES, say) and the
// example as its address and token.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TBLIMIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// startServe starts bin with args, waits for its "serving" line and
// returns its gRPC address. When the test ends the server is stopped as an
// operator would (SIGTERM) and must exit cleanly; its log is printed when
// the test failed.
func startServe(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = environ()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log serveLog
	addr := make(chan string, 1)
	exited := make(chan error, 1)
	go func() {
		log.read(stderr, regexp.MustCompile(`msg=serving grpc=(\S+)`), addr)
		exited <- cmd.Wait() // after the last read, as Wait requires
	}()
	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("stopping tblimit serve: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("tblimit serve, stopped: %v", err)
			}
		case <-ctx.Done():
			cmd.Process.Kill()
			<-exited
			t.Errorf("tblimit serve did not stop within a minute of SIGTERM")
		}
		if t.Failed() {
			t.Logf("tblimit serve's log:\n%s", log.String())
		}
	})
	select {
	case a := <-addr:
		return a
	case err := <-exited:
		exited <- err // for the cleanup
		t.Fatalf("tblimit serve exited before serving: %v\n%s", err, log.String())
		return ""
	}
}

// serveLog keeps what a server writes to stderr, read by one goroutine and
// printed by the test.
type serveLog struct {
	mu sync.Mutex
	b  strings.Builder
}

// read keeps every line of r until it ends, and sends the first match of
// serving's group to addr. It drains r whatever happens, so that the server
// never blocks on its log.
func (l *serveLog) read(r io.Reader, serving *regexp.Regexp, addr chan<- string) {
	lines := bufio.NewScanner(r)
	for lines.Scan() {
		l.mu.Lock()
		l.b.WriteString(lines.Text() + "\n")
		l.mu.Unlock()
		if m := serving.FindStringSubmatch(lines.Text()); m != nil && addr != nil {
			addr <- m[1]
			addr = nil
		}
	}
	io.Copy(io.Discard, r) // a line too long for the scanner ends its loop
}

func (l *serveLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
