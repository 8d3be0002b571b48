package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Environment of the child processes these tests start from their own binary.
const (
	// envFakeMode turns the test binary into a fake `tigerbeetle start` (see fakeServer).
	envFakeMode = "TESTENV_FAKE_TIGERBEETLE"
	envFakeLog  = "TESTENV_FAKE_LOG"
	// envDialProbe makes Start and Shared accept a fake server that only accepts TCP
	// connections.
	envDialProbe = "TESTENV_DIAL_PROBE"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envFakeMode); mode != "" {
		os.Exit(fakeServer(mode, os.Args[1:]))
	}
	if os.Getenv(envDialProbe) != "" {
		defaultProbe = dialProbe
	}
	Main(m)
}

// dialProbe is ready as soon as a TCP connection succeeds: enough for a fake server, which
// does not speak TigerBeetle's protocol.
// Like the real client, it retries until ctx is done.
func dialProbe(ctx context.Context, _ uint64, addresses []string) error {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addresses[0])
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// withProbe replaces the readiness probe of Start.
func withProbe(p probeFunc) Option { return func(o *options) { o.probe = p } }

// captureTB records how Start and Shared end a test, so that their skip and fatal paths can
// be checked without ending the calling test.
type captureTB struct {
	testing.TB
	skipped, failed string
}

func (c *captureTB) Skip(args ...any) {
	c.skipped = strings.TrimSuffix(fmt.Sprintln(args...), "\n")
	runtime.Goexit()
}

func (c *captureTB) Fatal(args ...any) {
	c.failed = strings.TrimSuffix(fmt.Sprintln(args...), "\n")
	runtime.Goexit()
}

func (c *captureTB) Fatalf(format string, args ...any) {
	c.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f in a goroutine, since Skip and Fatal end it.
func (c *captureTB) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(c)
	}()
	<-done
}
