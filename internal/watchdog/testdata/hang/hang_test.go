// Package hang is a test that never ends, run by the watchdog's tests
// with a short -timeout: it lies in testdata so that go test ./... never
// runs it.
package hang

import (
	"os"
	"testing"
	"time"

	"github.com/shardwheel/shardwheel/internal/watchdog"
)

func TestMain(m *testing.M) { os.Exit(watchdog.Main(m)) }

// TestHangs waits for a channel nobody sends on (or for an hour, so that
// the runtime sees no deadlock).
func TestHangs(t *testing.T) {
	select {
	case <-make(chan struct{}):
	case <-time.After(time.Hour):
	}
}
