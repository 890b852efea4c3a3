package pool_test

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/pool"
)

func get(tb testing.TB, a *pool.Arena, lane int) (idx, gen uint32) {
	tb.Helper()
	idx, gen, ok := a.Get(lane)
	require.True(tb, ok, "Get(%d) failed", lane)
	return idx, gen
}

func TestNodeSize(t *testing.T) {
	assert.Equal(t, uintptr(32), unsafe.Sizeof(pool.Node{}))
	// ChunkSize nodes fill whole cache lines, two nodes per line.
	assert.Zero(t, unsafe.Sizeof(pool.Node{})*pool.ChunkSize%64)
	assert.Equal(t, pool.MaxNodes, pool.ChunkSize<<12)
}

// pointerFree reports the path of the first field of t that holds a pointer
// the GC would have to scan, or "" if there is none.
func pointerFree(t reflect.Type, path string) string {
	switch t.Kind() {
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	case reflect.Array:
		return pointerFree(t.Elem(), path+"[]")
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if p := pointerFree(f.Type, path+"."+f.Name); p != "" {
				return p
			}
		}
		return ""
	default: // Ptr, Func, Slice, Map, Interface, String, Chan, UnsafePointer
		return path + " (" + t.Kind().String() + ")"
	}
}

func TestNodeIsPointerFree(t *testing.T) {
	typ := reflect.TypeFor[pool.Node]()
	assert.Empty(t, pointerFree(typ, typ.Name()))
	arr := reflect.ArrayOf(pool.ChunkSize, typ)
	assert.Empty(t, pointerFree(arr, "chunk"))

	// The checker itself must catch pointers, including nested ones.
	type inner struct {
		_ [2]uint64
		p *int
	}
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[struct {
		a atomic.Uint64
		b [3]inner
	}](), "x"))
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[atomic.Pointer[int]](), "x"))
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[string](), "x"))
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[func()](), "x"))
}

func TestNewReserved(t *testing.T) {
	const reserved = 2049
	a := pool.New(reserved, 2)
	assert.Equal(t, uint32(reserved), a.Reserved())
	assert.Equal(t, uint32(reserved), a.HighWater())
	assert.Equal(t, 2, a.Lanes())
	// Reserved indices are usable at once (the shard's sentinels).
	for _, idx := range []uint32{0, 1, reserved - 1, reserved, pool.ChunkSize - 1} {
		assert.True(t, a.Allocated(idx), "index %d", idx)
	}
	assert.False(t, a.Allocated(pool.ChunkSize), "second chunk allocated early")
	n := a.Node(reserved - 1)
	n.Key = 7
	assert.Equal(t, uint64(7), a.Node(reserved-1).Key)

	for i := range uint32(10) {
		idx, gen := get(t, a, int(i))
		assert.Equal(t, reserved+i, idx, "fresh indices are handed out in order after the reserved ones")
		assert.Equal(t, uint32(1), gen, "first life of a node")
		assert.Equal(t, reserved+i+1, a.HighWater(), "HighWater grows by one per fresh Get")
		assert.True(t, a.Allocated(idx))
	}
}

func TestNewLanes(t *testing.T) {
	assert.Equal(t, 1, pool.New(0, 0).Lanes(), "at least one lane")
	assert.Equal(t, 1, pool.New(0, -3).Lanes(), "at least one lane")
	assert.Equal(t, 4, pool.New(0, 4).Lanes())

	a := pool.New(0, 1)
	assert.False(t, a.Allocated(0), "no reserved indices, no chunk yet")
	idx, _ := get(t, a, 0)
	assert.Equal(t, uint32(0), idx, "no reserved indices: index 0 is handed out")
	assert.True(t, a.Allocated(0))
}

func TestGenerationAndReuse(t *testing.T) {
	a := pool.New(16, 2)
	idx, gen := get(t, a, 0)
	assert.Equal(t, gen, a.Node(idx).Gen.Load())
	hw := a.HighWater()

	for life := range 5 {
		called := false
		*a.Task(idx) = func() { called = true }
		a.Node(idx).Key = uint64(life)
		var c pool.Chain
		a.Add(&c, idx)
		assert.Nil(t, *a.Task(idx), "Add must clear the task")
		assert.Equal(t, 1, c.Len())
		a.PutChain(0, &c)
		assert.Zero(t, c.Len(), "PutChain empties the chain")

		idx2, gen2 := get(t, a, 0)
		require.Equal(t, idx, idx2, "freed node is reused (LIFO)")
		require.Equal(t, gen+1, gen2, "Get bumps the generation")
		require.Equal(t, gen2, a.Node(idx2).Gen.Load())
		require.Equal(t, hw, a.HighWater(), "reuse does not grow the arena")
		assert.False(t, called)
		gen = gen2
	}

	// A second fresh node starts its own generation count.
	idx3, gen3 := get(t, a, 0)
	assert.NotEqual(t, idx, idx3)
	assert.Equal(t, uint32(1), gen3)
	assert.Equal(t, hw+1, a.HighWater())
}

func TestLIFO(t *testing.T) {
	a := pool.New(0, 1)
	var idxs []uint32
	for range 3 {
		idx, _ := get(t, a, 0)
		idxs = append(idxs, idx)
	}
	// Free them one chain at a time: the last freed is the first reused.
	for _, idx := range idxs {
		var c pool.Chain
		a.Add(&c, idx)
		a.PutChain(0, &c)
	}
	for i := len(idxs) - 1; i >= 0; i-- {
		idx, _ := get(t, a, 0)
		assert.Equal(t, idxs[i], idx)
	}
}

func TestStealFromOtherLane(t *testing.T) {
	a := pool.New(0, 4)
	idx, gen := get(t, a, 1)
	hw := a.HighWater()

	var c pool.Chain
	a.Add(&c, idx)
	a.PutChain(1, &c)

	for _, lane := range []int{0, 2, 3} {
		got, g := get(t, a, lane)
		assert.Equal(t, idx, got, "Get(%d) must steal from lane 1 before growing", lane)
		assert.Equal(t, gen+1, g)
		assert.Equal(t, hw, a.HighWater(), "stealing does not grow the arena")
		gen = g
		a.Add(&c, idx)
		a.PutChain(1, &c)
	}

	// Lanes are taken modulo Lanes, for Get and PutChain.
	got, _ := get(t, a, 5) // lane 1
	assert.Equal(t, idx, got)
	a.Add(&c, idx)
	a.PutChain(6, &c) // lane 2
	got, _ = get(t, a, 2)
	assert.Equal(t, idx, got)
	assert.Equal(t, hw, a.HighWater())

	// With every list empty, Get grows.
	fresh, _ := get(t, a, 0)
	assert.Equal(t, hw, fresh)
	assert.Equal(t, hw+1, a.HighWater())
}

func TestChains(t *testing.T) {
	a := pool.New(8, 2)
	var c pool.Chain
	assert.Zero(t, c.Len())
	a.PutChain(0, &c) // an empty chain is a no-op
	assert.Zero(t, c.Len())

	const n = 50
	want := map[uint32]bool{}
	var all []uint32
	for range 2 * n {
		idx, _ := get(t, a, 0)
		all = append(all, idx)
	}
	// Free every other node, in one chain.
	for i := 0; i < len(all); i += 2 {
		*a.Task(all[i]) = func() {}
		a.Add(&c, all[i])
		want[all[i]] = true
		assert.Equal(t, len(want), c.Len())
		assert.Nil(t, *a.Task(all[i]))
	}
	hw := a.HighWater()
	a.PutChain(1, &c)
	assert.Zero(t, c.Len())
	var empty pool.Chain
	assert.Equal(t, empty, c, "PutChain resets the chain")

	got := map[uint32]bool{}
	for range n {
		idx, _ := get(t, a, 0)
		require.False(t, got[idx], "index %d handed out twice", idx)
		got[idx] = true
	}
	assert.Equal(t, want, got, "Gets return exactly the freed nodes")
	assert.Equal(t, hw, a.HighWater(), "no fresh index before the free list is empty")

	idx, _ := get(t, a, 0)
	assert.Equal(t, hw, idx, "then the arena grows")

	// Two chains pushed onto the same lane are both kept.
	var c1, c2 pool.Chain
	for i := range 4 {
		a.Add(&c1, all[2*i])
		a.Add(&c2, all[2*i+1])
	}
	a.PutChain(0, &c1)
	a.PutChain(0, &c2)
	got = map[uint32]bool{}
	for range 8 {
		idx, _ := get(t, a, 1)
		got[idx] = true
	}
	assert.Len(t, got, 8)
	for i := range 8 {
		assert.True(t, got[all[i]], "index %d lost", all[i])
	}
	assert.Equal(t, hw+1, a.HighWater())
}

func TestGrowAcrossChunks(t *testing.T) {
	a := pool.New(3, 1)
	n := pool.ChunkSize + 10
	seen := make(map[uint32]bool, n)
	for i := range n {
		idx, gen := get(t, a, 0)
		require.False(t, seen[idx], "index %d handed out twice", idx)
		seen[idx] = true
		require.Equal(t, uint32(1), gen)
		require.GreaterOrEqual(t, idx, a.Reserved())
		require.Less(t, idx, a.HighWater())
		require.True(t, a.Allocated(idx))
		// Every index is backed by real, distinct memory.
		a.Node(idx).Key = uint64(idx)
		require.NotNil(t, a.Task(idx))
		require.Equal(t, uint32(3+i+1), a.HighWater())
	}
	assert.Len(t, seen, n)
	for idx := range seen {
		require.Equal(t, uint64(idx), a.Node(idx).Key)
	}
	assert.True(t, a.Allocated(pool.ChunkSize+9))
	assert.False(t, a.Allocated(2*pool.ChunkSize))
}

// TestConcurrentGetPut runs producers that Get nodes and hand them to a single
// owner goroutine, which frees them in chains on alternating lanes. It checks
// that no index is held twice at once, that generations advance by exactly
// one per life, and that nodes are reused rather than leaked.
func TestConcurrentGetPut(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			prev := runtime.GOMAXPROCS(procs)
			t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
			testConcurrentGetPut(t)
		})
	}
}

func testConcurrentGetPut(t *testing.T) {
	const (
		reserved = 5
		lanes    = 4
		batch    = 16 // owner frees in chains of this many
		chanCap  = 32
		maxIdx   = 1 << 16
	)
	producers, perProducer := 8, 5000
	if testing.Short() {
		producers, perProducer = 4, 1000
	}
	a := pool.New(reserved, lanes)

	var (
		holder  [maxIdx]atomic.Int32  // 0 = free, p+1 = producer p, -1 = owner
		lastGen [maxIdx]atomic.Uint32 // generation of the latest life
		bad     atomic.Int64
		mu      sync.Mutex
		errs    []string
	)
	fail := func(msg string) {
		bad.Add(1)
		mu.Lock()
		if len(errs) < 10 {
			errs = append(errs, msg)
		}
		mu.Unlock()
	}

	type handoff struct{ idx, gen uint32 }
	ch := make(chan handoff, chanCap)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perProducer {
				idx, gen, ok := a.Get(p)
				if !ok {
					fail("Get failed")
					return
				}
				if idx < reserved || idx >= maxIdx {
					fail("index out of range")
					return
				}
				if !holder[idx].CompareAndSwap(0, int32(p+1)) {
					fail("index handed to two goroutines at once")
				}
				if g := a.Node(idx).Gen.Load(); g != gen {
					fail("Get returned a generation different from Node.Gen")
				}
				if old := lastGen[idx].Swap(gen); gen != old+1 {
					fail("generation did not advance by one")
				}
				// Use the node as a producer would.
				a.Node(idx).Key = uint64(idx)<<32 | uint64(gen)
				*a.Task(idx) = func() {}
				if !holder[idx].CompareAndSwap(int32(p+1), -1) {
					fail("holder changed while a producer held the node")
				}
				ch <- handoff{idx, gen}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(ch)
	}()

	// The owner runs in the test goroutine.
	var c pool.Chain
	lane, puts := 0, 0
	for h := range ch {
		if holder[h.idx].Load() != -1 {
			fail("owner received a node it does not hold")
		}
		if a.Node(h.idx).Key != uint64(h.idx)<<32|uint64(h.gen) {
			fail("node changed while in transit")
		}
		if *a.Task(h.idx) == nil {
			fail("task lost in transit")
		}
		// Release before Add: once PutChain runs, a producer may take it.
		if !holder[h.idx].CompareAndSwap(-1, 0) {
			fail("owner lost the node")
		}
		a.Add(&c, h.idx)
		if *a.Task(h.idx) != nil {
			fail("Add did not clear the task")
		}
		if c.Len() == batch {
			a.PutChain(lane, &c)
			lane = (lane + 1) % lanes
			puts++
		}
	}
	a.PutChain(lane, &c)
	require.Zero(t, bad.Load(), "%v", errs)
	require.Greater(t, puts, 0)

	// Nodes outside the free lists at any moment: at most one per producer,
	// chanCap in the channel, one in the owner's hand, batch-1 in the chain.
	// Allow slack for Gets that miss a lane refilled while they scan.
	inFlight := producers + chanCap + 1 + batch
	hw := a.HighWater()
	t.Logf("high water %d after %d Gets (in flight bound %d)", hw-reserved, producers*perProducer, inFlight)
	assert.LessOrEqual(t, int(hw-reserved), 2*inFlight+lanes*batch, "nodes leaked: arena grew instead of reusing")

	// Every node is back on some free list: Getting them all does not grow
	// the arena and returns each index in [reserved, hw) exactly once.
	seen := map[uint32]bool{}
	for range hw - reserved {
		idx, gen := get(t, a, 0)
		require.False(t, seen[idx], "index %d twice", idx)
		seen[idx] = true
		require.Equal(t, lastGen[idx].Load()+1, gen)
	}
	assert.Equal(t, hw, a.HighWater(), "a node was lost from the free lists")
	idx, _ := get(t, a, 0)
	assert.Equal(t, hw, idx)
}

// TestPopRaceABA hammers a single small free list with concurrent Gets while
// the owner pushes each node back as soon as it arrives, so that a pop often
// finds that the head it read was popped, and pushed back, meanwhile: the ABA
// case that the tag in the list head defends against. Without the tag, a
// stale CAS installs a node that another goroutine holds as the new head.
func TestPopRaceABA(t *testing.T) {
	prev := runtime.GOMAXPROCS(4)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })

	const (
		nodes   = 4
		workers = 4
		maxIdx  = 1 << 12
	)
	rounds := 50000
	if testing.Short() {
		rounds = 5000
	}
	a := pool.New(0, 1)
	var c pool.Chain
	for range nodes {
		idx, _ := get(t, a, 0)
		a.Add(&c, idx)
	}
	a.PutChain(0, &c)
	require.Equal(t, uint32(nodes), a.HighWater())

	// holder[idx] is 1 from Get until the owner takes the node back.
	var holder [maxIdx]atomic.Int32
	var twice, other atomic.Int64
	ch := make(chan uint32, 2*workers)
	var wg sync.WaitGroup
	var remaining atomic.Int64
	remaining.Store(int64(rounds))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for remaining.Add(-1) >= 0 {
				// Two pops in a row: the second one is what a stale
				// CAS would hand out again. When every node is in
				// flight the arena grows; the new node joins the others.
				var got [2]uint32
				for k := range got {
					idx, _, ok := a.Get(0)
					if !ok || idx >= maxIdx {
						other.Add(1)
						return
					}
					if !holder[idx].CompareAndSwap(0, 1) {
						twice.Add(1)
					}
					got[k] = idx
				}
				ch <- got[0]
				ch <- got[1]
			}
		}()
	}
	go func() {
		wg.Wait()
		close(ch)
	}()
	for idx := range ch {
		if !holder[idx].CompareAndSwap(1, 0) {
			other.Add(1)
		}
		a.Add(&c, idx)
		a.PutChain(0, &c)
	}
	assert.Zero(t, twice.Load(), "an index was held by two goroutines at once")
	assert.Zero(t, other.Load(), "Get failed or handed out an index it should not")
	// Every node ever handed out is back: draining returns distinct indices.
	hw := a.HighWater()
	seen := map[uint32]bool{}
	for range hw {
		idx, _ := get(t, a, 0)
		require.False(t, seen[idx], "index %d twice on the free list", idx)
		seen[idx] = true
	}
	assert.Equal(t, hw, a.HighWater(), "a node was lost from the free list")
}

func TestSteadyStateAllocs(t *testing.T) {
	a := pool.New(0, 2)
	var c pool.Chain
	cycle := func() {
		for range 64 {
			idx, _, _ := a.Get(0)
			a.Add(&c, idx)
		}
		a.PutChain(1, &c)
	}
	cycle() // allocates the first chunk
	hw := a.HighWater()
	allocs := testing.AllocsPerRun(100, cycle)
	assert.Zero(t, allocs, "steady-state Get/Add/PutChain must not allocate")
	assert.Equal(t, hw, a.HighWater(), "steady state must reuse nodes")
}

func BenchmarkGetPut(b *testing.B) {
	a := pool.New(0, 1)
	var c pool.Chain
	for range 64 { // warm up: allocate the first chunk and fill the list
		idx, _, _ := a.Get(0)
		a.Add(&c, idx)
	}
	a.PutChain(0, &c)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		idx, _, ok := a.Get(0)
		if !ok {
			b.Fatal("Get failed")
		}
		a.Add(&c, idx)
		if c.Len() == 64 {
			a.PutChain(0, &c)
		}
	}
	b.StopTimer()
	if hw := a.HighWater(); hw > 128 {
		b.Fatalf("high water %d: nodes are not reused", hw)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkGetParallel measures contended Gets on separate lanes, with the
// benchmark goroutines freeing their own nodes (standing in for the owner;
// each goroutine owns its chain).
func BenchmarkGetParallel(b *testing.B) {
	lanes := runtime.GOMAXPROCS(0)
	a := pool.New(0, lanes)
	var next atomic.Int32
	var mu sync.Mutex // PutChain is owner-only: serialise the owners
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lane := int(next.Add(1))
		var c pool.Chain
		for pb.Next() {
			idx, _, ok := a.Get(lane)
			if !ok {
				panic("Get failed")
			}
			a.Add(&c, idx)
			if c.Len() == 64 {
				mu.Lock()
				a.PutChain(lane, &c)
				mu.Unlock()
			}
		}
		mu.Lock()
		a.PutChain(lane, &c)
		mu.Unlock()
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
