package root

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// envFleet makes the test binary a member of a fleet (see fleetMember):
// its value is "clusterID addresses ledger".
const envFleet = "TBLIMIT_CLI_TEST_FLEET"

// fleetMember is a process with a Client of its own, deciding every 50 ms
// until its standard input closes, and printing each outcome on a line:
// "ok", "never" (no answer since the Client started), "lost" (no answer)
// or the error.
func fleetMember(spec string) int {
	var cluster uint64
	var addresses string
	var ledgerNo uint32
	if _, err := fmt.Sscan(spec, &cluster, &addresses, &ledgerNo); err != nil {
		fmt.Println(err)
		return 1
	}
	c, err := ledger.Dial(cluster, strings.Split(addresses, ","), ledger.WithTimeout(time.Second))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer c.Close()
	r := ledger.Resource{Name: "fleet", Ledger: ledgerNo, Kind: ledger.KindRequests, Window: time.Second, DefaultLimit: 1 << 30, Lazy: true}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	key := "member-" + strconv.Itoa(os.Getpid())
	for {
		select {
		case <-done:
			return 0
		case <-time.After(50 * time.Millisecond):
		}
		_, err := c.Acquire(context.Background(), r, ledger.Request{User: key, Amount: 1})
		switch {
		case err == nil:
			fmt.Println("ok")
		case errors.Is(err, ledger.ErrUnavailable) && strings.Contains(err.Error(), "no answer since this Client started"):
			fmt.Println("never")
		case errors.Is(err, ledger.ErrUnavailable):
			fmt.Println("lost")
		default:
			fmt.Println(strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
}

// member is a running fleetMember and what it printed.
type member struct {
	cmd   *exec.Cmd
	stdin io.Closer
	mu    sync.Mutex
	lines []string
}

func (m *member) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.lines...)
}

// A fleet larger than a replica accepts, on a real server: the processes
// beyond the replica's connections each say, on every call, that the
// cluster never answered them and why; once some processes exit, they
// answer by themselves.
func TestFleetBeyondConnectionLimit(t *testing.T) {
	srv := testenv.Start(t) // --development: a replica accepts 8 client connections
	ledgerNo := uint32(1000 + os.Getpid()%1000)
	setup, err := ledger.Dial(srv.ClusterID, srv.Addresses, ledger.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r := ledger.Resource{Name: "fleet", Ledger: ledgerNo, Kind: ledger.KindRequests, Window: time.Second, DefaultLimit: 1 << 30, Lazy: true}
	if err := setup.CreateResource(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	setup.Close() // its connection is one of the 8
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	ms := make([]*member, n)
	for i := range ms {
		m := &member{cmd: exec.Command(exe)}
		m.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s %d", envFleet, srv.ClusterID, strings.Join(srv.Addresses, ","), ledgerNo))
		stdin, err := m.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := m.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		m.stdin = stdin
		go func() {
			lines := bufio.NewScanner(stdout)
			for lines.Scan() {
				m.mu.Lock()
				m.lines = append(m.lines, lines.Text())
				m.mu.Unlock()
			}
		}()
		t.Cleanup(func() { stdin.Close(); _ = m.cmd.Wait() })
		ms[i] = m
	}
	// Each member decides 20 times a second: give every one time to
	// connect, or to find that it cannot.
	time.Sleep(6 * time.Second)
	var stuck, answering []*member
	for _, m := range ms {
		lines := m.seen()
		switch {
		case len(lines) == 0:
			t.Fatal("a member printed nothing")
		case !contains(lines, "ok"):
			stuck = append(stuck, m)
			for _, l := range lines {
				if l != "never" {
					t.Errorf("a member without a connection printed %q, want only \"never\" (no answer since the Client started)", l)
					break
				}
			}
		default:
			answering = append(answering, m)
		}
	}
	t.Logf("%d members answered, %d had no connection", len(answering), len(stuck))
	if len(stuck) == 0 || len(answering) == 0 || len(answering) > 8 {
		t.Fatalf("%d members answered and %d had none; want at most 8 answering (--development) and the rest without a connection", len(answering), len(stuck))
	}
	// Members with connections exit: those without connect and answer.
	for _, m := range answering[:len(stuck)] {
		m.stdin.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, m := range stuck {
		for !contains(m.seen(), "ok") {
			if time.Now().After(deadline) {
				t.Fatalf("a member without a connection still had no answer 20 s after %d others exited", len(stuck))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}
