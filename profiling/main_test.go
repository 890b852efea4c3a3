package profiling_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// Handler starts none, and Serve's and Capture's end with them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
