package testenv

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/internal/launch"
	"github.com/tblimit/tblimit/testenv/fake"
)

// envDialProbe makes Start and Shared, in a child test binary, accept a fake server that
// only accepts TCP connections.
const envDialProbe = "TESTENV_DIAL_PROBE"

func TestMain(m *testing.M) {
	fake.Serve()
	if os.Getenv(envDialProbe) != "" {
		defaultOptions = append(defaultOptions, launch.WithProbe(fake.DialProbe))
	}
	Main(m)
}

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
