// Command tblimit provisions and operates rate, bandwidth and money limits kept in TigerBeetle.
package main

import (
	"os"

	"github.com/tblimit/tblimit/cmd/tblimit/root"
)

func main() { os.Exit(int(root.Main())) }
