// Package testenv runs tests on the embedded engine and on real tigerbeetle servers and
// clusters (Each, Shared, Start, StartCluster, Main); package launch, which it builds on,
// starts the servers without importing package testing. Proxy and StartMeshCluster put
// fault proxies between clients and replicas, and between replicas.
//
// The modelled backend and a real server are shared by every test of a package, and
// outlive each run of a test (go test -count=2 runs it twice on the same one). A test
// that runs on them keeps to its own ledgers (Backend.NewLedger) and derives the IDs it
// names from Backend.Key, so that no test meets another's accounts or transfers.
package testenv
