package ratelimit_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/service/ratelimit"
)

// Watch loads what the files say: a file that does not parse is refused
// once, until it changes; one the cluster could not put in force is tried
// again until it can.
func TestWatchRetriesWhatTheClusterRefused(t *testing.T) {
	engine := embedded.New()
	t.Cleanup(engine.Close)
	sc := simnet.New(engine, simnet.Model{Name: "free"})
	t.Cleanup(sc.Close)
	svc, err := ratelimit.New(ledger.New(sc, ledger.WithTimeout(250*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "rl.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	cfg, err := ratelimit.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reports []error
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ratelimit.Watch(ctx, svc, path, 10*time.Millisecond, nil, func(err error) {
		mu.Lock()
		reports = append(reports, err)
		mu.Unlock()
	})
	seen := func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), reports...)
	}
	rules := func() int { c, _ := svc.Config(); return len(c.Rules()) }

	write("domain: d\ndescriptors: [\n") // does not parse
	waitFor(t, func() bool { return len(seen()) == 1 })
	time.Sleep(50 * time.Millisecond)
	if r := seen(); len(r) != 1 || r[0] == nil || rules() != 1 {
		t.Fatalf("reports %v, %d rules; want one refusal and the first configuration in force", r, rules())
	}

	sc.SetFaults(simnet.Faults{Stall: true}) // the cluster stops answering
	write("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")
	waitFor(t, func() bool { return len(seen()) == 2 })
	if r := seen(); r[1] == nil || rules() != 1 {
		t.Fatalf("reports %v, %d rules; want the new rule's creation refused, the old configuration in force", r, rules())
	}
	sc.SetFaults(simnet.Faults{}) // it answers again: the same files load
	// Load puts the configuration in force before Watch reports it: wait for the report.
	waitFor(t, func() bool { return len(seen()) >= 3 })
	if r := seen(); len(r) != 3 || r[2] != nil || rules() != 2 {
		t.Errorf("reports %v, %d rules; want the failure reported once, then the load", r, rules())
	}
}
