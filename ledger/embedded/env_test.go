package embedded_test

import (
	"testing"

	"github.com/tblimit/tblimit/testenv"
)

// The conformance tests run each body on the embedded engine and, when a
// tigerbeetle binary is found, on a real server (testenv.Each).
func TestMain(m *testing.M) { testenv.Main(m) }
