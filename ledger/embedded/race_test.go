//go:build race

package embedded_test

// raceEnabled: the race detector makes the long random workloads ten
// times slower; they run a tenth as long under it.
const raceEnabled = true
