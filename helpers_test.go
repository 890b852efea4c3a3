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

const waitFor, pollEvery = 10 * time.Second, time.Millisecond

func noop() {}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
