// Command tblimit provisions and operates rate, bandwidth and money limits kept in TigerBeetle.
package main

import (
	"os"

	"github.com/tblimit/tblimit/cmd/tblimit/cli"
)

func main() { os.Exit(int(cli.Main())) }
