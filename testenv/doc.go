// Package testenv runs tests on the embedded engine and on real tigerbeetle servers and
// clusters (Each, Shared, Start, StartCluster, Main); package launch, which it builds on,
// starts the servers without importing package testing.
package testenv
