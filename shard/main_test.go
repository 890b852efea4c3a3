package shard

import (
	"os"
	"testing"

	"github.com/shardwheel/shardwheel/internal/watchdog"
)

// TestMain runs the tests under the watchdog, which says which tests are
// still running, and what they wait for, before go test's -timeout kills
// the package.
func TestMain(m *testing.M) { os.Exit(watchdog.Main(m)) }
