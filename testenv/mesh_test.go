package testenv

import (
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// createAccount makes one new account through c within limit, and reports whether the
// cluster answered in time.
func createAccount(t *testing.T, c tb.Client, limit time.Duration) bool {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		res, err := c.CreateAccounts([]tb.Account{{ID: tb.ID(), Ledger: 1, Code: 1}})
		if err == nil && (len(res) != 1 || res[0].Status != tb.AccountCreated) {
			t.Errorf("CreateAccounts = %+v", res)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		return true
	case <-time.After(limit):
		return false
	}
}

// On a real server the proxy loses a reply, not the request: the TigerBeetle client sends
// the request again and gets the reply the server kept.
func TestProxyLosesARealReply(t *testing.T) {
	srv := Start(t)
	p := StartProxy(t, srv.Addresses[0], WithFraming(TigerBeetleFraming))
	c := newClient(t, srv.ClusterID, []string{p.Addr()})
	if !createAccount(t, c, 30*time.Second) {
		t.Fatal("no answer through the proxy")
	}
	p.LoseReplies(1)
	start := time.Now()
	if !createAccount(t, c, 30*time.Second) {
		t.Fatal("no answer after a lost reply")
	}
	if s := p.Stats(); s.RepliesLost != 1 || s.Dropped != 1 {
		t.Fatalf("Stats() = %+v, want one reply lost and its connection dropped", s)
	}
	t.Logf("answered %v after its reply was lost", time.Since(start))
}

// A replica of three cut off from the others, then the one the client talks to: the
// cluster answers through the other two, and again through all three once healed.
func TestMeshIsolatesAReplica(t *testing.T) {
	cl, m := StartMeshCluster(t, 3)
	c := m.Client(t, cl)
	if !createAccount(t, c, 30*time.Second) {
		t.Fatal("no answer through the mesh")
	}
	talks := busiest(m, func() { createAccount(t, c, 10*time.Second) })
	for _, i := range []int{(talks + 1) % 3, talks} {
		m.Isolate(i)
		start := time.Now()
		if !createAccount(t, c, 30*time.Second) {
			t.Fatalf("replica %d cut off: no answer in 30 s", i)
		}
		t.Logf("replica %d cut off (the client talked to %d): answered in %v", i, talks, time.Since(start))
		m.Heal()
		if !createAccount(t, c, 30*time.Second) {
			t.Fatalf("healed: no answer in 30 s")
		}
	}
}

// busiest returns the replica whose front proxy carried the most bytes from clients while
// f ran: the one a client sends its requests to.
func busiest(m *Mesh, f func()) int {
	before := make([]int64, len(m.front))
	for i, p := range m.front {
		before[i] = p.Stats().Up
	}
	f()
	best, most := 0, int64(-1)
	for i, p := range m.front {
		if n := p.Stats().Up - before[i]; n > most {
			best, most = i, n
		}
	}
	return best
}
