//go:build race

package simnet

// raceEnabled says the race detector is on: it slows every goroutine's
// own work several times over.
const raceEnabled = true
