package root

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service/ratelimit"
	"github.com/tblimit/tblimit/testenv"
)

// serveProcess runs `tblimit serve` (this test binary as tblimit) on the
// cluster at addresses and returns its gRPC address and the process.
func serveProcess(t *testing.T, config string, addresses []string) (string, *exec.Cmd) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "--config", config, "--addresses", strings.Join(addresses, ","),
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "", "--timeout", "30s")
	cmd.Env = append(os.Environ(), envMain+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	serving := regexp.MustCompile(`msg=serving grpc=(\S+)`)
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if m := serving.FindStringSubmatch(lines.Text()); m != nil {
			go func() {
				for lines.Scan() { // keep the pipe drained
				}
			}()
			return m[1], cmd
		}
	}
	t.Fatalf("tblimit serve ended before serving: %v", lines.Err())
	return "", nil
}

// tblimit serve killed (SIGKILL) under load, then started again: no
// admission it acknowledged is missing from what the cluster recorded, and
// no window of any user holds more than the limit, counting every hold
// recorded (those of calls whose answer was lost too).
func TestServeKilledUnderLoad(t *testing.T) {
	const users = 20
	serveKilledUnderLoad(t, func(rng *rand.Rand, _, _ int) string { return fmt.Sprint("u", rng.IntN(users)) })
}

// The same, with keys as a gateway sends them: each key new, decided
// twice by one caller, so that serve is killed while it provisions keys.
func TestServeKilledDuringFirstSights(t *testing.T) {
	serveKilledUnderLoad(t, func(_ *rand.Rand, caller, n int) string { return fmt.Sprintf("f%d-%d", caller, n/2) })
}

// serveKilledUnderLoad runs serve on a real server under 64 callers, each
// deciding keyOf(its random numbers, its index, its call's number), kills
// it, starts it again and audits the cluster's record.
func serveKilledUnderLoad(t *testing.T, keyOf func(rng *rand.Rand, caller, n int) string) {
	srv := testenv.Start(t) // skips without a tigerbeetle binary
	const limit, callers = 20, 64
	domain := fmt.Sprintf("kill-%08x", rand.Uint32())
	config := filepath.Join(t.TempDir(), "rl.yaml")
	cmdtest.WriteFile(t, config, fmt.Sprintf("domain: %s\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: %d}\n", domain, limit))

	addr, first := serveProcess(t, config, srv.Addresses)
	var current atomic.Pointer[ratelimit.Client]
	dial := func(addr string) {
		c, err := ratelimit.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		current.Store(c)
	}
	dial(addr)
	start := time.Now()
	var mu sync.Mutex
	acked, asked := map[string]int{}, map[string]bool{}
	var errs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				user := keyOf(rng, i, n)
				mu.Lock()
				asked[user] = true
				mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				r, err := current.Load().Limiter(domain, "user").Allow(ctx, user)
				cancel()
				switch {
				case err != nil:
					errs.Add(1)
					time.Sleep(10 * time.Millisecond)
				case r.Allowed:
					mu.Lock()
					acked[user]++
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	if err := first.Process.Kill(); err != nil { // SIGKILL: no drain
		t.Fatal(err)
	}
	_ = first.Wait()
	addr, _ = serveProcess(t, config, srv.Addresses)
	dial(addr)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	end := time.Now()

	// The cluster's record, read by a Client of the test's own.
	c, err := ledger.Dial(srv.ClusterID, srv.Addresses, ledger.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg, err := ratelimit.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := ratelimit.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Load(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	res, _ := svc.Resource(cfg.Rules()[0])
	total := 0
	for key := range asked {
		a, err := c.Audit(ctx, res, ratelimit.UserKey([]string{key}), start.Add(-time.Second), end.Add(time.Second))
		if errors.Is(err, ledger.ErrUnknownUser) && acked[key] == 0 {
			continue // asked while serve was down: never provisioned
		}
		if err != nil {
			t.Fatalf("Audit(%s) = %v (%d admissions acknowledged)", key, err, acked[key])
		}
		total += acked[key]
		if a.MostInWindow > limit || a.Units < uint64(acked[key]) {
			t.Errorf("%s: the cluster recorded %d units (%d in its busiest window), %d acknowledged; want at most %d in a window and none acknowledged missing",
				key, a.Units, a.MostInWindow, acked[key], limit)
		}
	}
	t.Logf("%d admissions of %d keys acknowledged, %d calls failed while serve was down", total, len(acked), errs.Load())
	if total == 0 {
		t.Fatal("no admission acknowledged: the load did not run")
	}
}
