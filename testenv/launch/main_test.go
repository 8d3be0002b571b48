//go:build unix

package launch

import (
	"os"
	"testing"

	"github.com/tblimit/tblimit/testenv/internal/fake"
)

func TestMain(m *testing.M) {
	fake.Serve()
	os.Exit(m.Run())
}
