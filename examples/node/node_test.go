package node_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
)

// The Node example, run against a tblimit serve --api of its own on the
// embedded default: it provisions a merchant while serve runs, pays under
// request IDs with a retry, reserves and commits, and switches on error
// reasons. It needs node and npm (CI installs them); without them it skips.
func TestNodeExample(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: the Node example is not run (.ci/run installs Debian's nodejs and npm)", tool)
		}
	}
	if testing.Short() {
		t.Skip("-short: the Node example installs packages and starts a server")
	}
	install(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "tblimit")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/tblimit/tblimit/cmd/tblimit").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tokens := filepath.Join(dir, "tokens.yaml")
	src := "tokens:\n  - {name: payments, token: n0de-example, allow: {admin: \"*\", fund: \"*\", decide: \"*\", read: \"*\"}}\n"
	if err := os.WriteFile(tokens, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startServe(t, bin, "--data", filepath.Join(dir, "data.journal"), "serve", "--api", "--api-tokens", tokens,
		"--require-request-id", "--grpc-addr", "127.0.0.1:0", "--http-addr", "")

	node := exec.Command("node", "main.mjs")
	node.Env = append(os.Environ(), "TBLIMIT_ADDR="+addr, "TBLIMIT_TOKEN=n0de-example", "TBLIMIT_RUN=test")
	out, err := node.CombinedOutput()
	if err != nil {
		t.Fatalf("node main.mjs: %v\n%s", err, out)
	}
	for _, want := range []string{"paid 12500 once (sent twice)", "captured 7450", "REQUEST_ID_REUSED, UNKNOWN_USER, RESERVATION_ENDED", "\nok\n"} {
		if !strings.Contains(string(out), want) {
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
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer n0de-example"), 30*time.Second)
	defer cancel()
	cl := tblimitv1.NewLimitServiceClient(conn)
	for user, want := range map[string]uint64{"merchant-test": 12500 + 7450, "alice-test": 500000 - 12500 - 7450} {
		u, err := cl.GetUser(ctx, &tblimitv1.GetUserRequest{Resource: "usd-day", User: user})
		if err != nil || u.GetUser().GetFunds() != want {
			t.Errorf("GetUser(%s) = %v, %v; want funds %d", user, u, err, want)
		}
	}
}

// install runs npm ci in the example's directory; a registry out of reach
// skips the test (it says so), any other failure fails it.
func install(t *testing.T) {
	t.Helper()
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if regexp.MustCompile(`ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH`).Match(out.Bytes()) {
			t.Skipf("npm ci: the npm registry is out of reach: %s", lastLine(out.String()))
		}
		t.Fatalf("npm ci: %v\n%s", err, out.String())
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// startServe starts bin with args, waits for its "serving" line and
// returns its gRPC address; the server is stopped when the test ends.
func startServe(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	serving := regexp.MustCompile(`msg=serving grpc=(\S+)`)
	var log strings.Builder
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		log.WriteString(lines.Text() + "\n")
		if m := serving.FindStringSubmatch(lines.Text()); m != nil {
			go func() { // keep reading, so that the server never blocks on its log
				for lines.Scan() {
				}
			}()
			return m[1]
		}
	}
	t.Fatalf("tblimit serve exited before serving:\n%s", log.String())
	return ""
}
