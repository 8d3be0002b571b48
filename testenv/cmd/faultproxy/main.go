// Command faultproxy is a fault proxy (testenv.Proxy) for manual runs: it forwards
// connections to -target and reads commands on standard input (delay up 100ms, hang, heal,
// ...; "help" lists them).
//
//	go run ./testenv/cmd/faultproxy -target 127.0.0.1:3000
//
// It prints the address it listens on first; give that to clients instead of the target's.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tblimit/tblimit/testenv"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("faultproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	target := fs.String("target", "", "address to forward to (host:port)")
	raw := fs.Bool("raw", false, "treat the stream as bytes, not TigerBeetle messages: every chunk from the target counts as a reply")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *target == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "faultproxy: want -target host:port and no arguments")
		return 2
	}
	opts := []testenv.ProxyOption{testenv.WithListen(*listen)}
	if !*raw {
		opts = append(opts, testenv.WithFraming(testenv.TigerBeetleFraming))
	}
	p, err := testenv.NewProxy(*target, opts...)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer p.Close()
	fmt.Fprintln(stdout, p.Addr())
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "help" {
			fmt.Fprintln(stdout, testenv.ProxyCommands)
			continue
		}
		out, err := p.Command(line)
		if err != nil {
			fmt.Fprintln(stdout, err)
			continue
		}
		if out != "" {
			fmt.Fprintln(stdout, out)
		}
	}
	return 0
}
