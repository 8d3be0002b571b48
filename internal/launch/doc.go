// Package launch starts local tigerbeetle servers and clusters: it finds a binary, formats
// data files, starts replicas on loopback, waits until they answer, and stops, kills,
// restarts and removes them.
//
// It is what `tblimit tigerbeetle up` and the benchmarks run, and what the test harness in
// package testenv builds on; it does not import package testing. Start runs one replica,
// StartCluster several; both take the same Options.
package launch
