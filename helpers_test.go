package shardwheel_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// newScheduler returns a scheduler stopped at the end of the test.
func newScheduler(t testing.TB, opts ...shardwheel.Option) *shardwheel.Scheduler {
	t.Helper()
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	return s
}

// waitFor bounds every condition a test polls for (require.Eventually):
// generous, because the race detector on a loaded 2-core machine is slow,
// and only reached when the condition is never going to hold.
const waitFor, pollEvery = 10 * time.Second, time.Millisecond

func noop() {}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
