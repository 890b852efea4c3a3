package ring_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/pool"
	"github.com/shardwheel/shardwheel/ring"
)

// nodes returns an arena and n nodes taken from it.
func nodes(tb testing.TB, n int) (*pool.Arena, []uint32) {
	tb.Helper()
	a := pool.New(n, 1)
	idxs := make([]uint32, n)
	for i := range idxs {
		idx, _, ok := a.Get(0)
		require.True(tb, ok)
		idxs[i] = idx
	}
	return a, idxs
}

func newQueue() *ring.Queue { return new(ring.Queue) }

// forEachProcs runs f as a subtest ("procs=N") at GOMAXPROCS 1, 2, 4 and 8
// in turn, restoring GOMAXPROCS after each: one P, where every goroutine
// takes turns, up to more Ps than most test machines have cores.
func forEachProcs(t *testing.T, f func(t *testing.T, procs int)) {
	t.Helper()
	for _, procs := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			f(t, procs)
		})
	}
}

func TestFIFOSingleGoroutine(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a, idxs := nodes(t, n)
			q := newQueue()
			for i, idx := range idxs {
				a.Node(idx).Key = uint64(i)
				q.Push(idx, a.Link(idx))
			}
			for i, want := range idxs {
				idx, ok := q.TryPop(a)
				require.True(t, ok, "pop %d of %d", i, n)
				require.Equal(t, want, idx)
				require.Equal(t, uint64(i), a.Node(idx).Key)
			}
			_, ok := q.TryPop(a)
			assert.False(t, ok)
			assert.True(t, q.Empty())
		})
	}
}

func TestTryPopEmpty(t *testing.T) {
	a, idxs := nodes(t, 1)
	q := newQueue()
	for range 3 {
		idx, ok := q.TryPop(a)
		assert.False(t, ok, "a new queue is empty")
		assert.Zero(t, idx)
	}
	assert.True(t, q.Empty(), "failed pops do not change the queue")

	q.Push(idxs[0], a.Link(idxs[0]))
	idx, ok := q.TryPop(a)
	require.True(t, ok)
	require.Equal(t, idxs[0], idx)
	for range 3 {
		idx, ok := q.TryPop(a)
		assert.False(t, ok, "a drained queue is empty")
		assert.Zero(t, idx)
	}
	// TryPop on an empty queue touches no node: a nil arena would panic.
	_, ok = q.TryPop(nil)
	assert.False(t, ok)
}

func TestEmptyTransitions(t *testing.T) {
	a, n := nodes(t, 3)
	q := newQueue()
	steps := []struct {
		push      []uint32
		pops      int
		wantEmpty bool
	}{
		{wantEmpty: true},
		{push: n[:1], wantEmpty: false},
		{pops: 1, wantEmpty: true},
		{push: n[:2], wantEmpty: false},
		{pops: 1, wantEmpty: false},
		{push: n[:1], wantEmpty: false}, // n[0] again, behind n[1]
		{pops: 1, wantEmpty: false},
		{pops: 1, wantEmpty: true},
		{push: n, wantEmpty: false},
		{pops: 3, wantEmpty: true},
	}
	for i, s := range steps {
		for _, idx := range s.push {
			q.Push(idx, a.Link(idx))
		}
		for k := range s.pops {
			_, ok := q.TryPop(a)
			require.True(t, ok, "step %d pop %d", i, k)
		}
		assert.Equal(t, s.wantEmpty, q.Empty(), "step %d", i)
	}
	_, ok := q.TryPop(a)
	assert.False(t, ok)
}

// TestReuse pushes nodes again after they were popped, over and over, in
// different patterns, as the shard does with recycled pool nodes.
func TestReuse(t *testing.T) {
	const rounds = 10000
	t.Run("one node", func(t *testing.T) {
		a, n := nodes(t, 1)
		q := newQueue()
		for i := range rounds {
			a.Node(n[0]).Key = uint64(i)
			q.Push(n[0], a.Link(n[0]))
			idx, ok := q.TryPop(a)
			require.True(t, ok, "round %d", i)
			require.Equal(t, n[0], idx)
			require.Equal(t, uint64(i), a.Node(idx).Key)
			require.True(t, q.Empty())
		}
	})
	t.Run("rotation", func(t *testing.T) {
		// Keep k nodes queued; pop the oldest and push it straight back:
		// every node is reused while others are still queued.
		for _, k := range []int{2, 3, 17} {
			a, n := nodes(t, k)
			q := newQueue()
			for _, idx := range n {
				q.Push(idx, a.Link(idx))
			}
			for i := range rounds {
				idx, ok := q.TryPop(a)
				require.True(t, ok, "k=%d round %d", k, i)
				require.Equal(t, n[i%k], idx, "k=%d round %d", k, i)
				q.Push(idx, a.Link(idx))
			}
			for i := range k {
				idx, ok := q.TryPop(a)
				require.True(t, ok)
				require.Equal(t, n[(rounds+i)%k], idx)
			}
			assert.True(t, q.Empty())
		}
	})
	t.Run("drain and refill", func(t *testing.T) {
		a, n := nodes(t, 8)
		q := newQueue()
		for i := range rounds / 8 {
			m := 1 + i%8
			// Push in a changing order so that links from earlier lives
			// would point somewhere wrong if not cleared.
			order := make([]uint32, m)
			for j := range m {
				order[j] = n[(i+3*j)%8]
			}
			seen := map[uint32]bool{}
			var pushed []uint32
			for _, idx := range order {
				if !seen[idx] {
					seen[idx] = true
					q.Push(idx, a.Link(idx))
					pushed = append(pushed, idx)
				}
			}
			for _, want := range pushed {
				idx, ok := q.TryPop(a)
				require.True(t, ok)
				require.Equal(t, want, idx, "round %d", i)
			}
			_, ok := q.TryPop(a)
			require.False(t, ok)
			require.True(t, q.Empty())
		}
	})
}

// runMPSC has producers push perProducer values each through a small set of
// nodes of their own, which they reuse once the consumer (the test
// goroutine) has popped them. Each node's Key carries (producer, sequence).
// It checks that every value arrives exactly once, in its producer's order.
func runMPSC(t *testing.T, producers, perProducer, nodesEach int) {
	t.Helper()
	a := pool.New(64, producers)
	own := make([][]uint32, producers)
	for p := range own {
		for range nodesEach {
			idx, _, ok := a.Get(p)
			require.True(t, ok)
			own[p] = append(own[p], idx)
		}
	}
	q := newQueue()

	// Node.State is the handoff flag: 1 while queued, 0 once the consumer
	// has read the node and the producer may use it again.
	var wg sync.WaitGroup
	var abort atomic.Bool // set when the consumer gives up
	t.Cleanup(func() { abort.Store(true); wg.Wait() })
	start := make(chan struct{})
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range perProducer {
				idx := own[p][i%nodesEach]
				n := a.Node(idx)
				for n.State.Load() != 0 {
					if abort.Load() {
						return
					}
					runtime.Gosched() // the consumer still holds it
				}
				n.Key = uint64(p)<<32 | uint64(i)
				n.State.Store(1)
				q.Push(idx, a.Link(idx))
			}
		}()
	}
	close(start)

	// Collect problems instead of stopping early: producers wait for
	// their nodes to come back.
	next := make([]int, producers) // next expected sequence per producer
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	// A queue that loses a node stalls the producer that owns it; fail
	// once nothing has arrived for a long while.
	const stall = 10 * time.Second
	total := producers * perProducer
	lastPop, misses := time.Now(), 0
	for got := 0; got < total; {
		idx, ok := q.TryPop(a)
		if !ok {
			if misses++; misses%1024 == 0 && time.Since(lastPop) > stall {
				t.Fatalf("no value for %v after %d of %d (next per producer %v; %v)", stall, got, total, next, problems)
			}
			runtime.Gosched()
			continue
		}
		got++
		lastPop, misses = time.Now(), 0
		n := a.Node(idx)
		if n.State.Load() != 1 {
			report("node %d popped while not queued", idx)
		}
		p, i := int(n.Key>>32), int(uint32(n.Key))
		n.State.Store(0)
		switch {
		case p >= producers || i >= perProducer:
			report("value %#x was never pushed", n.Key)
		case own[p][i%nodesEach] != idx:
			report("value %d/%d arrived in node %d, not its own", p, i, idx)
		case i < next[p]:
			report("producer %d value %d popped twice or late (next %d)", p, i, next[p])
		case i > next[p]:
			report("producer %d: got %d, want %d (lost or reordered)", p, i, next[p])
		}
		next[p] = i + 1
	}
	wg.Wait()
	require.Empty(t, problems)
	_, ok := q.TryPop(a)
	assert.False(t, ok, "queue must be empty after every value was popped")
	assert.True(t, q.Empty())
	for p := range producers {
		assert.Equal(t, perProducer, next[p], "producer %d", p)
	}
}

func TestConcurrentMPSC(t *testing.T) {
	producers, perProducer := 6, 10000
	if testing.Short() {
		producers, perProducer = 4, 2000
	}
	forEachProcs(t, func(t *testing.T, _ int) {
		for _, nodesEach := range []int{1, 64} {
			t.Run(fmt.Sprintf("nodes=%d", nodesEach), func(t *testing.T) {
				runMPSC(t, producers, perProducer, nodesEach)
			})
		}
	})
}

// TestStackTakesEverythingNewestFirst: TakeAll returns the node pushed last,
// whose links lead through every other node to the first, and empties the
// stack; Waiting tells whether anything is there, from any goroutine.
func TestStackTakesEverythingNewestFirst(t *testing.T) {
	a, n := nodes(t, 4)
	var s ring.Stack
	assert.False(t, s.Waiting())
	assert.Zero(t, s.TakeAll(), "an empty stack yields 0")
	for _, idx := range n {
		s.Push(idx, a.Link(idx))
	}
	assert.True(t, s.Waiting())
	var got []uint32
	for idx := s.TakeAll(); idx != 0; idx = a.Link(idx).Load() {
		got = append(got, idx)
	}
	assert.Equal(t, []uint32{n[3], n[2], n[1], n[0]}, got)
	assert.False(t, s.Waiting(), "TakeAll empties it")
	assert.Zero(t, s.TakeAll())
}

// TestStackConcurrentPushAndTake: producers push while the consumer takes,
// many times over; every node pushed is taken exactly once.
func TestStackConcurrentPushAndTake(t *testing.T) {
	const producers, each = 4, 64
	a := pool.New(producers*each, producers)
	var s ring.Stack
	var wg sync.WaitGroup
	var left atomic.Int64
	left.Store(producers * each)
	seen := make(map[uint32]int)
	for p := range producers {
		wg.Go(func() {
			for range each {
				idx, _, ok := a.Get(p)
				if !ok {
					panic("arena full")
				}
				s.Push(idx, a.Link(idx))
				runtime.Gosched()
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for left.Load() > 0 && time.Now().Before(deadline) {
		for idx := s.TakeAll(); idx != 0; idx = a.Link(idx).Load() {
			seen[idx]++
			left.Add(-1)
		}
	}
	wg.Wait()
	for idx := s.TakeAll(); idx != 0; idx = a.Link(idx).Load() {
		seen[idx]++
		left.Add(-1)
	}
	require.Zero(t, left.Load(), "every push taken")
	require.Len(t, seen, producers*each)
	for idx, n := range seen {
		require.Equal(t, 1, n, "node %d taken %d times", idx, n)
	}
}

// TestWaitingAndBacklog: Waiting sees pushes the consumer has not taken,
// Backlogged what it took and has not popped, Empty neither.
func TestWaitingAndBacklog(t *testing.T) {
	a, n := nodes(t, 3)
	q := newQueue()
	q.Push(n[0], a.Link(n[0]))
	q.Push(n[1], a.Link(n[1]))
	assert.True(t, q.Waiting())
	assert.False(t, q.Backlogged())
	idx, ok := q.TryPop(a)
	require.True(t, ok)
	assert.Equal(t, n[0], idx)
	assert.False(t, q.Waiting(), "the pop took the stack into the backlog")
	assert.True(t, q.Backlogged())
	assert.False(t, q.Empty())
	q.Push(n[2], a.Link(n[2]))
	assert.True(t, q.Waiting())
	for _, want := range []uint32{n[1], n[2]} {
		idx, ok := q.TryPop(a)
		require.True(t, ok)
		assert.Equal(t, want, idx, "the backlog first, then the newer pushes")
	}
	assert.True(t, q.Empty())
	assert.False(t, q.Backlogged())
}

// TestPushPopAllocs checks that the queue itself never allocates.
func TestPushPopAllocs(t *testing.T) {
	a, n := nodes(t, 32)
	q := newQueue()
	allocs := testing.AllocsPerRun(1000, func() {
		for _, idx := range n {
			q.Push(idx, a.Link(idx))
		}
		for range n {
			if _, ok := q.TryPop(a); !ok {
				panic("lost a node")
			}
		}
	})
	assert.Zero(t, allocs)
	assert.True(t, q.Empty())
}

func BenchmarkPushPop(b *testing.B) {
	a, n := nodes(b, 1)
	q := newQueue()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		q.Push(n[0], a.Link(n[0]))
		if idx, ok := q.TryPop(a); !ok || idx != n[0] {
			b.Fatalf("pop = %d, %v; want %d", idx, ok, n[0])
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkPushParallel measures contended pushes: GOMAXPROCS producers (via
// RunParallel) and one consumer goroutine draining the queue. Each producer
// cycles through nodes of its own, waiting for the consumer to release one
// (Node.State) before pushing it again.
func BenchmarkPushParallel(b *testing.B) {
	const perProducer = 256
	a := pool.New(64, 1)
	q := newQueue()
	var stop atomic.Bool
	var popped atomic.Int64
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		var n int64
		for {
			if idx, ok := q.TryPop(a); ok {
				a.Node(idx).State.Store(0)
				n++
				continue
			}
			if stop.Load() {
				// Producers are done: drain what is left.
				for {
					idx, ok := q.TryPop(a)
					if !ok {
						break
					}
					a.Node(idx).State.Store(0)
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
		var own [perProducer]uint32
		for i := range own {
			idx, _, ok := a.Get(0)
			if !ok {
				panic("Get failed")
			}
			own[i] = idx
		}
		i := 0
		for pb.Next() {
			n := a.Node(own[i])
			for n.State.Load() != 0 {
				runtime.Gosched()
			}
			n.State.Store(1)
			q.Push(own[i], a.Link(own[i]))
			i = (i + 1) % perProducer
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
