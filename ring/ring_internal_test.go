package ring

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/pool"
)

// TestQueueLayout checks the false-sharing padding: the producers' fields
// share one cache line, the consumer's first sits on another, and the struct
// fills whole lines so that neighbouring allocations share neither.
func TestQueueLayout(t *testing.T) {
	const line = pad.CacheLineSize
	var q Queue
	size := unsafe.Sizeof(q)
	assert.Zero(t, size%line, "sizeof(Queue) = %d, not a multiple of %d", size, line)

	last := unsafe.Offsetof(q.last)
	first := unsafe.Offsetof(q.first)
	for name, f := range map[string]struct{ off, size uintptr }{
		"last":     {last, unsafe.Sizeof(q.last)},
		"stubNext": {unsafe.Offsetof(q.stubNext), unsafe.Sizeof(q.stubNext)},
	} {
		assert.Equal(t, last/line, f.off/line, "%s is not on last's line", name)
		assert.Equal(t, last/line, (f.off+f.size-1)/line, "%s straddles a line", name)
		assert.NotEqual(t, first/line, f.off/line, "%s shares first's line", name)
	}
	// first has its line to itself: nothing after it in the struct, and its
	// line ends the struct.
	assert.Equal(t, size/line-1, first/line, "first must sit on the last line")
	assert.GreaterOrEqual(t, first, uintptr(line), "first shares the producers' line")
	assert.Equal(t, uintptr(64), uintptr(pad.CacheLineSize))
}

func TestStubIsNoNode(t *testing.T) {
	assert.GreaterOrEqual(t, uint64(Stub), uint64(pool.MaxNodes), "Stub could name a node")
	assert.NotZero(t, Stub, "0 ends a chain")
}

func newArena(t *testing.T, n int) (*pool.Arena, []uint32) {
	t.Helper()
	a := pool.New(64, 1)
	idxs := make([]uint32, n)
	for i := range idxs {
		idx, _, _, ok := a.Get(0)
		require.True(t, ok)
		a.Node(idx).Key = uint64(100 + i)
		idxs[i] = idx
	}
	return a, idxs
}

// halfPush is the first half of a Push: the producer has exchanged last but
// not yet stored the link from the previous element. It returns the second
// half.
func halfPush(q *Queue, a *pool.Arena, idx uint32) (finish func()) {
	q.link(a, idx).Store(0)
	prev := q.last.Swap(idx)
	return func() { q.link(a, prev).Store(idx) }
}

func popAll(t *testing.T, q *Queue, a *pool.Arena) []uint32 {
	t.Helper()
	var got []uint32
	for range 100 {
		idx, ok := q.TryPop(a)
		if !ok {
			return got
		}
		got = append(got, idx)
	}
	t.Fatal("queue does not run dry")
	return nil
}

// TestProducerBetweenSwapAndLink reproduces, deterministically, a producer
// stopped between its exchange of last and its link store: the consumer must
// report nothing past the break, lose nothing, and deliver everything in
// order once the link is stored.
func TestProducerBetweenSwapAndLink(t *testing.T) {
	t.Run("into an empty queue", func(t *testing.T) {
		a, n := newArena(t, 2)
		var q Queue
		q.Init()
		finish := halfPush(&q, a, n[0])
		assert.False(t, q.Empty(), "a push in progress is not empty")
		for range 3 {
			_, ok := q.TryPop(a)
			assert.False(t, ok, "the element is not linked yet")
		}
		finish()
		assert.Equal(t, []uint32{n[0]}, popAll(t, &q, a))
		assert.True(t, q.Empty())

		// The queue works normally afterwards.
		q.Push(a, n[1], a.Node(n[1]))
		q.Push(a, n[0], a.Node(n[0]))
		assert.Equal(t, []uint32{n[1], n[0]}, popAll(t, &q, a))
		assert.True(t, q.Empty())
	})

	t.Run("behind a linked element", func(t *testing.T) {
		a, n := newArena(t, 3)
		var q Queue
		q.Init()
		q.Push(a, n[0], a.Node(n[0]))
		finish := halfPush(&q, a, n[1])
		// n[0] is linked but its successor is not: the consumer may
		// not hand n[0] back, since the producer will still write its
		// link.
		for range 3 {
			_, ok := q.TryPop(a)
			assert.False(t, ok)
		}
		assert.False(t, q.Empty())
		// A later producer completes its push behind the broken link.
		q.Push(a, n[2], a.Node(n[2]))
		_, ok := q.TryPop(a)
		assert.False(t, ok, "n[2] sits behind the break")

		finish()
		assert.Equal(t, []uint32{n[0], n[1], n[2]}, popAll(t, &q, a))
		assert.True(t, q.Empty())
	})

	// The consumer found its oldest element alone (last == first) and
	// pushed the stub behind it, but a producer exchanged last in between:
	// the stub is linked behind the producer's node, which is not yet
	// linked behind the consumer's. This builds that state step by step.
	t.Run("between the consumer's check and its stub push", func(t *testing.T) {
		a, n := newArena(t, 3)
		var q Queue
		q.Init()
		q.Push(a, n[0], a.Node(n[0]))
		finish := halfPush(&q, a, n[1])
		_, ok := q.TryPop(a) // advances first to n[0], finds no link
		require.False(t, ok)
		require.Equal(t, n[0], q.first)
		q.push(a, Stub, &q.stubNext) // the consumer's stub push, after the producer's swap
		require.Equal(t, Stub, q.last.Load())

		_, ok = q.TryPop(a)
		assert.False(t, ok, "n[0] has no successor yet")
		assert.False(t, q.Empty())
		q.Push(a, n[2], a.Node(n[2])) // links from the stub
		_, ok = q.TryPop(a)
		assert.False(t, ok)

		finish()
		assert.Equal(t, []uint32{n[0], n[1], n[2]}, popAll(t, &q, a))
		assert.True(t, q.Empty())
	})

	// The producer stops in another goroutine; the consumer polls.
	t.Run("concurrent", func(t *testing.T) {
		a, n := newArena(t, 2)
		var q Queue
		q.Init()
		q.Push(a, n[0], a.Node(n[0]))
		swapped, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			finish := halfPush(&q, a, n[1])
			close(swapped)
			<-release
			finish()
		}()
		<-swapped
		for range 1000 {
			_, ok := q.TryPop(a)
			require.False(t, ok)
		}
		close(release)
		<-done
		assert.Equal(t, []uint32{n[0], n[1]}, popAll(t, &q, a))
		assert.True(t, q.Empty())
	})
}
