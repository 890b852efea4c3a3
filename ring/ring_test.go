package ring_test

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/ring"
)

func mustNew(tb testing.TB, size int) *ring.Ring {
	tb.Helper()
	r, err := ring.New(size)
	require.NoError(tb, err)
	require.NotNil(tb, r)
	return r
}

// withGOMAXPROCS sets GOMAXPROCS to n for the rest of the test and restores
// the previous value when the test ends.
func withGOMAXPROCS(t *testing.T, n int) {
	t.Helper()
	prev := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

func TestNew(t *testing.T) {
	tests := []struct {
		size    int
		wantCap int
		wantErr bool
	}{
		{size: 1, wantCap: 2}, // one slot cannot work: see New
		{size: 2, wantCap: 2},
		{size: 3, wantCap: 4},
		{size: 5, wantCap: 8},
		{size: 1000, wantCap: 1024},
		{size: 1024, wantCap: 1024},
		{size: 1025, wantCap: 2048},
		{size: 0, wantErr: true},
		{size: -1, wantErr: true},
		{size: ring.MaxSize + 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.size), func(t *testing.T) {
			r, err := ring.New(tt.size)
			if tt.wantErr {
				require.Error(t, err)
				assert.Nil(t, r)
				assert.Contains(t, err.Error(), strconv.Itoa(tt.size),
					"error should mention the rejected size")
				return
			}
			require.NoError(t, err)
			require.NotNil(t, r)
			assert.Equal(t, tt.wantCap, r.Cap())
			assert.Zero(t, r.Len())
			_, ok := r.TryPop()
			assert.False(t, ok, "new ring must be empty")
		})
	}
}

func TestFIFOSingleGoroutine(t *testing.T) {
	r := mustNew(t, 16)
	for i := range uint64(10) {
		require.True(t, r.Push(100+i))
	}
	assert.Equal(t, 10, r.Len())
	for i := range uint64(10) {
		v, ok := r.TryPop()
		require.True(t, ok)
		require.Equal(t, 100+i, v)
	}
	assert.Zero(t, r.Len())
	_, ok := r.TryPop()
	assert.False(t, ok)
}

// TestFullRing covers every capacity; New(1) yields capacity 2.
func TestFullRing(t *testing.T) {
	for _, size := range []int{1, 2, 3, 8, 64} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			r := mustNew(t, size)
			c := r.Cap()
			for i := range c {
				require.True(t, r.Push(uint64(i)), "push %d of %d", i, c)
			}
			assert.Equal(t, c, r.Len())
			assert.False(t, r.Push(999), "push into a full ring must fail")
			assert.False(t, r.Push(999), "and keep failing")
			assert.Equal(t, c, r.Len(), "failed pushes must not claim positions")

			// Pop one; exactly one push fits again.
			v, ok := r.TryPop()
			require.True(t, ok)
			require.Equal(t, uint64(0), v)
			assert.True(t, r.Push(uint64(c)))
			assert.False(t, r.Push(999))

			// Nothing was lost or overwritten.
			for i := 1; i <= c; i++ {
				v, ok := r.TryPop()
				require.True(t, ok, "pop %d", i)
				require.Equal(t, uint64(i), v)
			}
			_, ok = r.TryPop()
			assert.False(t, ok)
			assert.Zero(t, r.Len())
		})
	}
}

// TestSizeOneRoundsUp guards the one-slot case Vyukov's algorithm cannot
// handle: a second Push into a full ring must fail, not overwrite.
func TestSizeOneRoundsUp(t *testing.T) {
	r := mustNew(t, 1)
	require.True(t, r.Push(1))
	require.True(t, r.Push(2))
	assert.False(t, r.Push(3), "full ring accepted a push")
	for _, want := range []uint64{1, 2} {
		v, ok := r.TryPop()
		require.True(t, ok)
		assert.Equal(t, want, v)
	}
}

func TestWraparound(t *testing.T) {
	for _, size := range []int{2, 4, 16} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			r := mustNew(t, size)
			c := r.Cap()
			total := uint64(10 * c)
			var next, want uint64
			// Interleave: push up to 3 values, pop up to 2, so the fill level
			// drifts up to full and then the tail is drained, many laps.
			for want < total {
				for range 3 {
					if next < total && r.Push(next) {
						next++
					}
				}
				require.LessOrEqual(t, r.Len(), c)
				for range 2 {
					if v, ok := r.TryPop(); ok {
						require.Equal(t, want, v)
						want++
					}
				}
				if next == total {
					for {
						v, ok := r.TryPop()
						if !ok {
							break
						}
						require.Equal(t, want, v)
						want++
					}
				}
			}
			assert.Equal(t, total, want)
			assert.Zero(t, r.Len())
		})
	}
}

func TestPublished(t *testing.T) {
	r := mustNew(t, 8)
	assert.Zero(t, r.Published(0))
	assert.Zero(t, r.Published(100), "empty ring")

	for i := range uint64(5) {
		require.True(t, r.Push(i))
	}
	assert.Equal(t, 5, r.Published(100))
	assert.Equal(t, 5, r.Published(5))
	assert.Equal(t, 3, r.Published(3))
	assert.Equal(t, 0, r.Published(0))
	assert.Equal(t, 0, r.Published(-1))

	for k := 1; k <= 5; k++ {
		_, ok := r.TryPop()
		require.True(t, ok)
		assert.Equal(t, 5-k, r.Published(100), "after %d pops", k)
	}

	// A full ring whose head has wrapped: Published is bounded by the
	// number of values, never counts the same slot twice.
	for i := range uint64(r.Cap()) {
		require.True(t, r.Push(i))
	}
	assert.Equal(t, r.Cap(), r.Published(1000))
	assert.Equal(t, r.Cap(), r.Len())
	// Published does not consume.
	v, ok := r.TryPop()
	require.True(t, ok)
	assert.Equal(t, uint64(0), v)
	assert.Equal(t, r.Cap()-1, r.Published(1000))
}

// runMPSC pushes perProducer values from each of producers goroutines into r
// while the calling goroutine pops, and checks that every value arrives
// exactly once and per-producer FIFO.
func runMPSC(t *testing.T, r *ring.Ring, producers, perProducer int) {
	t.Helper()
	var wg sync.WaitGroup
	var start sync.WaitGroup
	start.Add(1)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			for i := range perProducer {
				v := uint64(p)<<32 | uint64(i)
				for !r.Push(v) {
					runtime.Gosched()
				}
			}
		}()
	}
	start.Done()

	// Consume in the test goroutine. Never stop early: producers would spin
	// on a full ring forever. Collect the first problems instead.
	next := make([]int, producers) // next expected sequence per producer
	seen := make([][]bool, producers)
	for p := range seen {
		seen[p] = make([]bool, perProducer)
	}
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	total := producers * perProducer
	for got := 0; got < total; {
		v, ok := r.TryPop()
		if !ok {
			runtime.Gosched()
			continue
		}
		got++
		p, i := int(v>>32), int(uint32(v))
		if p >= producers || i >= perProducer {
			report("value %#x was never pushed", v)
			continue
		}
		if seen[p][i] {
			report("producer %d value %d popped twice", p, i)
		}
		seen[p][i] = true
		if i != next[p] {
			report("producer %d: got %d, want %d (per-producer FIFO broken)", p, i, next[p])
		}
		next[p] = i + 1
	}
	wg.Wait()
	require.Empty(t, problems)
	_, ok := r.TryPop()
	assert.False(t, ok, "ring must be empty after all values were popped")
	assert.Zero(t, r.Len())
	for p := range producers {
		assert.Equal(t, perProducer, next[p], "producer %d", p)
		for i, s := range seen[p] {
			if !s {
				t.Fatalf("producer %d value %d never popped", p, i)
			}
		}
	}
}

func TestConcurrentMPSC(t *testing.T) {
	producers, perProducer := 8, 20000
	if testing.Short() {
		producers, perProducer = 4, 2000
	}
	for _, procs := range []int{1, 2, 4} {
		for _, size := range []int{2, 64} {
			t.Run(fmt.Sprintf("procs=%d/size=%d", procs, size), func(t *testing.T) {
				withGOMAXPROCS(t, procs)
				runMPSC(t, mustNew(t, size), producers, perProducer)
			})
		}
	}
}

// TestPublishedConcurrent checks that every value Published counts can be
// popped at once, while producers keep pushing.
func TestPublishedConcurrent(t *testing.T) {
	withGOMAXPROCS(t, 4)
	r := mustNew(t, 64)
	const producers = 4
	perProducer := 5000
	if testing.Short() {
		perProducer = 500
	}
	var done atomic.Int32
	for range producers {
		go func() {
			defer done.Add(1)
			for i := range perProducer {
				for !r.Push(uint64(i)) {
					runtime.Gosched()
				}
			}
		}()
	}
	total := producers * perProducer
	got := 0
	for got < total {
		n := r.Published(r.Cap())
		require.LessOrEqual(t, n, r.Len(), "published values are claimed values")
		for k := range n {
			_, ok := r.TryPop()
			require.True(t, ok, "value %d of %d counted by Published was not poppable", k, n)
		}
		got += n
		if n == 0 {
			runtime.Gosched()
		}
	}
	assert.Equal(t, total, got)
	for done.Load() != producers {
		runtime.Gosched()
	}
	assert.Zero(t, r.Len())
	assert.Zero(t, r.Published(r.Cap()))
}

func TestPushPopAllocs(t *testing.T) {
	r := mustNew(t, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range uint64(32) {
			r.Push(i)
		}
		for range 32 {
			r.TryPop()
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkPushPop(b *testing.B) {
	r := mustNew(b, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if !r.Push(uint64(i)) {
			b.Fatal("push failed on a drained ring")
		}
		if v, ok := r.TryPop(); !ok || v != uint64(i) {
			b.Fatalf("pop = %d, %v; want %d", v, ok, i)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkPushParallel measures contended pushes: GOMAXPROCS producers (via
// RunParallel) and one consumer goroutine draining the ring.
func BenchmarkPushParallel(b *testing.B) {
	r := mustNew(b, 1024)
	var stop atomic.Bool
	var popped atomic.Int64
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		var n int64
		for {
			if _, ok := r.TryPop(); ok {
				n++
				continue
			}
			if stop.Load() {
				// Producers are done: drain what is left.
				for {
					if _, ok := r.TryPop(); !ok {
						break
					}
					n++
				}
				popped.Store(n)
				return
			}
			runtime.Gosched()
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var v uint64
		for pb.Next() {
			for !r.Push(v) {
				runtime.Gosched()
			}
			v++
		}
	})
	b.StopTimer()
	stop.Store(true)
	<-consumerDone
	if got := popped.Load(); got != int64(b.N) {
		b.Fatalf("consumer popped %d values, want %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
