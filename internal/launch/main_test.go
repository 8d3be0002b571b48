//go:build unix

package launch

import (
	"os"
	"testing"

	"github.com/tblimit/tblimit/testenv/fake"
)

func TestMain(m *testing.M) {
	fake.Serve()
	os.Exit(m.Run())
}
