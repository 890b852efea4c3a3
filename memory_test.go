package shardwheel_test

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/shardwheel/shardwheel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of what a scheduler costs in memory: before any timer, at the
// limits of the options, and at a shard's capacity.

// TestFootprintBeforeAnyTimer measures the heap a Scheduler holds before it
// has any timer, per shard, at several GOMAXPROCS (which sets the lanes per
// shard): at most 128 KiB per shard; the measured figures are in
// BenchmarkNewFootprint.
func TestFootprintBeforeAnyTimer(t *testing.T) {
	for _, procs := range []int{2, 16, 64, 128} {
		perShard := newFootprint(t, procs, 8)
		assert.LessOrEqual(t, perShard, 128<<10, "GOMAXPROCS %d: %d bytes per shard", procs, perShard)
	}
}

// newFootprint returns the heap bytes per shard that New holds with the
// given GOMAXPROCS and shard count.
func newFootprint(tb testing.TB, procs, shards int) int {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	before := heapInUse()
	s, err := shardwheel.New(shardwheel.WithShards(shards))
	require.NoError(tb, err)
	after := heapInUse()
	runtime.KeepAlive(s)
	s.Stop()
	return int(after-before) / shards
}

// BenchmarkNewFootprint reports the heap New holds per shard before any
// timer, at several GOMAXPROCS.
func BenchmarkNewFootprint(b *testing.B) {
	for _, procs := range []int{2, 16, 64, 128} {
		b.Run("GOMAXPROCS="+strconv.Itoa(procs), func(b *testing.B) {
			var per int
			for range b.N {
				per = newFootprint(b, procs, procs)
			}
			b.ReportMetric(float64(per), "B/shard")
		})
	}
}

// TestOptionsThatCannotFitFailInNew: a combination whose fixed cost
// exceeds the machine fails in New with an error naming the options,
// instead of an out-of-memory crash later.
func TestOptionsThatCannotFitFailInNew(t *testing.T) {
	_, err := shardwheel.New(shardwheel.WithShards(shardwheel.MaxShards), shardwheel.WithInitialCapacity(maxInitialCapacity))
	require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
	for _, want := range []string{"WithShards(4096)", "WithInitialCapacity(4194304)", "MiB"} {
		assert.Contains(t, err.Error(), want)
	}
	// The largest shard count alone fits: nothing is preallocated.
	s, err := shardwheel.New(shardwheel.WithShards(shardwheel.MaxShards))
	require.NoError(t, err)
	s.Stop()
}

// TestShardCapacityIsExact fills one shard to ShardCapacity: the last timer
// fits and the next is refused with the error that names the capacity. It
// needs about 3 GB and a minute, so CI runs it on its own, without -race.
func TestShardCapacityIsExact(t *testing.T) {
	if os.Getenv("SHARDWHEEL_CAPACITY") == "" {
		t.Skip("set SHARDWHEEL_CAPACITY=1 to fill a shard (3 GB)")
	}
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithInitialCapacity(maxInitialCapacity))
	for i := range shardwheel.ShardCapacity {
		if _, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(0)); err != nil {
			t.Fatalf("timer %d of %d refused: %v", i+1, shardwheel.ShardCapacity, err)
		}
	}
	_, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(0))
	require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Contains(t, err.Error(), "67108863")
	assert.Equal(t, shardwheel.ShardCapacity, s.Pending())
}

// bytesPerSlot returns the heap a one-shard scheduler with first block
// 2^18 gains by filling that block with timers (all but index 0, which is
// reserved), per node of the block.
func bytesPerSlot(t *testing.T, schedule func(s *shardwheel.Scheduler, h shardwheel.Handler, i int)) float64 {
	const block = 1 << 18
	s, err := shardwheel.New(shardwheel.WithShards(1), shardwheel.WithInitialCapacity(block))
	require.NoError(t, err)
	defer s.Stop()
	h, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	before := heapInUse()
	for i := range block - 1 {
		schedule(s, h, i)
	}
	require.Eventually(t, func() bool { return s.Stats().Total.Queued == 0 }, waitFor, pollEvery)
	after := heapInUse()
	runtime.KeepAlive(s)
	return float64(int64(after)-int64(before)) / block
}

// TestBytesPerTimerNode: a node is 36 bytes, plus a task pointer in a
// block once a closure timer lands in it and 2 bytes once a Handler timer
// does: 38 bytes per Handler timer. The heap is measured in a process of
// its own (the test binary run again for this test alone): in the suite's
// process, what earlier tests' goroutines still held and let go of between
// the two readings made a figure of -1453 bytes.
func TestBytesPerTimerNode(t *testing.T) {
	if os.Getenv("SHARDWHEEL_BYTES_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestBytesPerTimerNode$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "SHARDWHEEL_BYTES_CHILD=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the measuring process:\n%s", out)
		require.Contains(t, string(out), "bytes per node:", "the measuring process ran the measurement:\n%s", out)
		t.Logf("%s", out)
		return
	}
	handler := bytesPerSlot(t, func(_ *shardwheel.Scheduler, h shardwheel.Handler, i int) {
		_, err := h.AfterFunc(uint64(i), time.Hour, shardwheel.ByKey(uint64(i)))
		require.NoError(t, err)
	})
	closure := bytesPerSlot(t, func(s *shardwheel.Scheduler, _ shardwheel.Handler, i int) {
		_, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(uint64(i))) // no closure allocated per timer
		require.NoError(t, err)
	})
	mixed := bytesPerSlot(t, func(s *shardwheel.Scheduler, h shardwheel.Handler, i int) {
		var err error
		if i == 0 {
			_, err = s.AfterFunc(time.Hour, noop, shardwheel.ByKey(uint64(i)))
		} else {
			_, err = h.AfterFunc(uint64(i), time.Hour, shardwheel.ByKey(uint64(i)))
		}
		require.NoError(t, err)
	})
	t.Logf("bytes per node: Handler %.2f, closure %.2f, both %.2f", handler, closure, mixed)
	ptr := float64(unsafe.Sizeof(func() {})) // 8 on 64-bit platforms
	assert.InDelta(t, 38, handler, 1, "36 + 2")
	assert.InDelta(t, 36+ptr, closure, 1, "36 + a pointer")
	assert.InDelta(t, 36+ptr+2, mixed, 1, "36 + a pointer + 2")
}

// TestAtCapacityEveryTimerEndsOnce repeats, at a small capacity, a full
// shard's life: one goroutine fills it until ErrTooManyPending, Pending
// reads the capacity, it cancels the last timer and retries until one
// AfterFunc is accepted, and Stop returns every timer that is left: as many
// as the capacity, whatever the shard goroutine did meanwhile.
func TestAtCapacityEveryTimerEndsOnce(t *testing.T) {
	const capacity = 50_000
	runs := 30
	if raceEnabled || testing.Short() {
		runs = 6
	}
	for run := range runs {
		s, err := shardwheel.New(shardwheel.WithShards(1), shardwheel.WithShardCapacity(capacity))
		require.NoError(t, err)
		var last shardwheel.Timer
		n := 0
		for ; ; n++ {
			tm, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(1))
			if err != nil {
				require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
				break
			}
			last = tm
		}
		require.Equal(t, capacity, n, "run %d: accepted", run)
		require.Equal(t, capacity, s.Pending(), "run %d", run)
		require.True(t, last.Cancel())
		retried := 0
		for ; ; retried++ {
			require.Less(t, retried, 1_000_000, "run %d: no AfterFunc accepted after a Cancel at capacity", run)
			if _, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(1)); err == nil {
				break
			}
			runtime.Gosched()
		}
		require.Equal(t, capacity, s.Pending(), "run %d", run)
		stopped := s.Stop()
		require.Len(t, stopped, capacity, "run %d: Stop returns every timer left (retries: %d)", run, retried)
		st := s.Stats().Total
		assert.Equal(t, st.Scheduled, st.Cancelled+st.Stopped, "run %d: every accepted timer ended one way", run)
	}
}
