package testenv

import (
	"sync"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/launch"
)

// Mesh is the fault proxies of a cluster started by StartMeshCluster: one on each link
// between two replicas, and one in front of each replica for clients. All of them know
// TigerBeetle's framing (TigerBeetleFraming).
type Mesh struct {
	mu    sync.Mutex
	links map[[2]int]*Proxy // {i, j}, i < j: the link replica i dials to reach j
	front []*Proxy
}

// StartMeshCluster starts a cluster of n replicas as StartCluster does, with a Proxy on
// every link between two replicas and one in front of each replica. Clients of the mesh's
// Addresses reach replica i through Front(i); replica i reaches replica j through Link(i,
// j). The proxies are closed when the test ends, after the cluster stopped.
func StartMeshCluster(t testing.TB, n int, opts ...launch.Option) (*Cluster, *Mesh) {
	t.Helper()
	m := &Mesh{links: map[[2]int]*Proxy{}}
	peers := func(i int, addresses []string) []string {
		for j := i + 1; j < len(addresses); j++ {
			addresses[j] = m.link(t, i, j, addresses[j]).Addr()
		}
		return addresses
	}
	c := StartCluster(t, n, append(opts, launch.WithReplicaAddresses(peers))...)
	for _, a := range c.Addresses {
		m.front = append(m.front, StartProxy(t, a, WithFraming(TigerBeetleFraming)))
	}
	return c, m
}

// link returns the proxy on the link from replica i to j, starting it on first use.
func (m *Mesh) link(t testing.TB, i, j int, target string) *Proxy {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.links[[2]int{i, j}]; ok {
		return p
	}
	p := StartProxy(t, target, WithFraming(TigerBeetleFraming))
	m.links[[2]int{i, j}] = p
	return p
}

// Addresses are the front proxies' addresses, in replica order: what a client of the mesh
// is given.
func (m *Mesh) Addresses() []string {
	out := make([]string, len(m.front))
	for i, p := range m.front {
		out[i] = p.Addr()
	}
	return out
}

// Client returns a new client of the cluster through the front proxies, closed when the
// test ends.
func (m *Mesh) Client(t testing.TB, c *Cluster) tb.Client {
	return newClient(t, c.ClusterID, m.Addresses())
}

// Front returns the proxy clients go through to reach replica i.
func (m *Mesh) Front(i int) *Proxy { return m.front[i] }

// Link returns the proxy on the link between replicas i and j (in either order).
func (m *Mesh) Link(i, j int) *Proxy {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.links[[2]int{min(i, j), max(i, j)}]
}

// Isolate cuts replica i off from the other replicas: every byte on its links to them is
// lost both ways (Blackhole), and nothing is closed. Clients still reach it.
func (m *Mesh) Isolate(i int) {
	for j := range m.front {
		if j != i {
			m.Link(i, j).Blackhole(Both)
		}
	}
}

// Heal ends every fault of every proxy of the mesh.
func (m *Mesh) Heal() {
	m.mu.Lock()
	ps := append([]*Proxy(nil), m.front...)
	for _, p := range m.links {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	for _, p := range ps {
		p.Heal()
	}
}
