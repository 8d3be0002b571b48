// Command tblimit provisions and operates rate, bandwidth and money limits kept in TigerBeetle.
package main

import (
	"os"

	"github.com/tblimit/tblimit/cmd/tblimit/root"
	// Its store's Pebble allocates with C's malloc: one arena keeps less
	// freed memory (see the package).
	_ "github.com/tblimit/tblimit/ledger/embedded/onearena"
)

func main() { os.Exit(int(root.Main())) }
