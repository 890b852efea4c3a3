package pool_test

import (
	"fmt"
	"math/bits"
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

func get(tb testing.TB, a *pool.Arena, lane int) uint32 {
	tb.Helper()
	idx, _, ok := a.Get(lane)
	require.True(tb, ok, "Get(%d) failed", lane)
	return idx
}

// put frees one node on lane, as the owner does.
func put(a *pool.Arena, lane int, idx uint32) {
	var c pool.Chain
	a.Add(&c, idx)
	a.PutChain(lane, &c)
}

// layout is the block layout the package documents, computed independently
// of the package: block 0 holds first rounded up to a power of two (clamped
// to [64, MaxFirst]); each later block is as large as all before it, capped
// at max(2^14, block 0). It returns the first index of every block that
// starts below limit, and their sizes.
func layout(first int, limit uint64) (starts, sizes []uint64) {
	first = min(max(first, 64), pool.MaxFirst)
	b0 := uint64(1) << bits.Len(uint(first-1))
	maxSize := max(b0, 1<<14)
	total := uint64(0)
	for total < limit {
		size := b0
		if total > 0 {
			size = min(total, maxSize)
		}
		starts = append(starts, total)
		sizes = append(sizes, size)
		total += size
	}
	return starts, sizes
}

// bytesFor is what Bytes must report once the block holding idx (and so every
// block before it) exists.
func bytesFor(first int, idx uint32) int {
	_, sizes := layout(first, uint64(idx)+1)
	n := uint64(0)
	for _, s := range sizes {
		n += s
	}
	return int(n) * pool.BaseNodeBytes
}

func TestConstants(t *testing.T) {
	assert.Equal(t, pool.MaxNodes-1, pool.Capacity, "index 0 is reserved")
	assert.Equal(t, 32+4, pool.BaseNodeBytes, "node, free-list link")
	assert.Equal(t, int(unsafe.Sizeof(func() {})), pool.TaskBytes, "a func value")
	assert.Equal(t, 32+4+pool.TaskBytes+2, pool.NodeBytes, "node, free-list link, task slot, handler slot")
	assert.Equal(t, 1<<22, pool.MaxFirst)
	// The layout tiles [0, MaxNodes) exactly, for every first block size.
	for _, first := range []int{64, 1 << 18, pool.MaxFirst} {
		starts, sizes := layout(first, pool.MaxNodes)
		last := len(starts) - 1
		assert.Equal(t, uint64(pool.MaxNodes), starts[last]+sizes[last], "first=%d", first)
	}
}

func TestNodeSize(t *testing.T) {
	assert.Equal(t, uintptr(32), unsafe.Sizeof(pool.Node{}))
	assert.Equal(t, uintptr(8), unsafe.Alignof(pool.Node{}))
	// Two nodes per 64-byte line, never straddling one (block arrays are
	// at least 8-aligned and nodes are 32 bytes, so this needs 32 | 64).
	assert.Zero(t, 64%unsafe.Sizeof(pool.Node{}))
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
	assert.Empty(t, pointerFree(reflect.ArrayOf(1<<18, typ), "block"))

	// The checker itself must catch pointers, including nested ones.
	type inner struct {
		_ [2]uint64
		_ *int
	}
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[struct {
		a atomic.Uint64
		b [3]inner
	}](), "x"))
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[atomic.Pointer[int]](), "x"))
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[string](), "x"))
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[func()](), "x"))
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[[]uint64](), "x"))
	assert.NotEmpty(t, pointerFree(reflect.TypeFor[unsafe.Pointer](), "x"))
	assert.Empty(t, pointerFree(reflect.TypeFor[[4]atomic.Uint32](), "x"))
}

func TestNewIsEmpty(t *testing.T) {
	tests := []struct {
		first, wantBlock0 int
	}{
		{first: -5, wantBlock0: 64},
		{first: 0, wantBlock0: 64},
		{first: 1, wantBlock0: 64},
		{first: 64, wantBlock0: 64},
		{first: 65, wantBlock0: 128},
		{first: 100, wantBlock0: 128},
		{first: 1024, wantBlock0: 1024},
		{first: 1025, wantBlock0: 2048},
		{first: 1 << 18, wantBlock0: 1 << 18},
		{first: pool.MaxFirst, wantBlock0: pool.MaxFirst},
		{first: pool.MaxFirst + 1, wantBlock0: pool.MaxFirst},
		{first: 1 << 30, wantBlock0: pool.MaxFirst},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.first), func(t *testing.T) {
			a := pool.New(tt.first, 2)
			assert.Zero(t, a.Bytes(), "New must not allocate a block")
			assert.Equal(t, uint32(1), a.HighWater(), "only the reserved index 0")
			assert.False(t, a.Allocated(0))
			assert.Nil(t, a.Find(0), "no block yet")
			assert.Nil(t, a.Find(1))

			idx := get(t, a, 0)
			assert.Equal(t, uint32(1), idx, "index 0 is reserved: the first Get hands out 1")
			assert.Equal(t, uint32(2), a.HighWater())
			assert.Equal(t, tt.wantBlock0*pool.BaseNodeBytes, a.Bytes(), "the first Get allocates exactly block 0's nodes and links")
			assert.True(t, a.Allocated(idx))
			assert.True(t, a.Allocated(uint32(tt.wantBlock0-1)), "block 0 holds %d nodes", tt.wantBlock0)
			assert.False(t, a.Allocated(uint32(tt.wantBlock0)), "block 1 must not exist yet")
			assert.Same(t, a.Node(idx), a.Find(idx))

			// Fresh Gets within block 0 hand out consecutive indices
			// and allocate nothing more.
			for i := range uint32(10) {
				idx := get(t, a, int(i))
				assert.Equal(t, 2+i, idx)
				assert.Equal(t, 3+i, a.HighWater(), "HighWater grows by one per fresh Get")
			}
			assert.Equal(t, tt.wantBlock0*pool.BaseNodeBytes, a.Bytes())

			// A block makes its task and handler arrays with the first
			// timer of each kind, once.
			a.Slot(idx).SetTask(pool.Task{Handler: 7})
			assert.Equal(t, tt.wantBlock0*(pool.BaseNodeBytes+pool.HandlerBytes), a.Bytes(), "a handler makes the handler array")
			a.Slot(idx + 1).SetTask(pool.Task{Func: func() {}})
			a.Slot(idx + 2).SetTask(pool.Task{Func: func() {}})
			assert.Equal(t, tt.wantBlock0*pool.NodeBytes, a.Bytes(), "a closure makes the task array")
		})
	}
}

func TestLanesAtLeastOne(t *testing.T) {
	for _, lanes := range []int{-3, 0, 1} {
		a := pool.New(0, lanes)
		idx := get(t, a, 7) // any lane number works modulo the count
		put(a, 3, idx)
		got := get(t, a, 0)
		assert.Equal(t, idx, got, "lanes=%d: one lane, so the node comes back", lanes)
		assert.Equal(t, uint32(2), a.HighWater())
	}
}

func TestIndexZeroNeverHandedOut(t *testing.T) {
	a := pool.New(64, 3)
	var held []uint32
	// Cross several blocks and free everything, several times over.
	for round := range 4 {
		for range 300 {
			idx := get(t, a, round)
			require.NotZero(t, idx)
			held = append(held, idx)
		}
		var c pool.Chain
		for _, idx := range held {
			a.Add(&c, idx)
		}
		a.PutChain(round, &c)
		held = held[:0]
	}
	assert.Equal(t, uint32(301), a.HighWater(), "freed nodes are reused")
	// Node 0 exists once block 0 does, but nobody gets it.
	assert.Zero(t, a.Node(0).State.Load(), "index 0 never started a life")
}

// TestBlockLayout grows arenas with several first-block sizes and checks that
// every index maps to distinct storage, that Node, Find, Link and Task agree on
// where the block boundaries are, and that Bytes follows the documented
// geometric-then-linear growth.
func TestBlockLayout(t *testing.T) {
	tests := []struct {
		first int
		n     int // Gets to do
	}{
		// Up to the first index of the second full-size (2^14) block: the
		// doubling blocks, then one doubling 2^14 block, then linear growth.
		{first: 64, n: 1<<16 + 5},
		{first: 100, n: 5000},   // rounded to 128
		{first: 1024, n: 70000}, // 1024, 1024, 2048, ... 8192, then 16384 each
		// Block 0 is already 2^18: every later block has the same size.
		{first: 1 << 18, n: 1<<19 + 5},
		// Block 0 alone is 184 MB; later blocks are covered by the
		// internal test's arithmetic.
		{first: pool.MaxFirst, n: 5000},
	}
	if testing.Short() {
		tests[3].n = 1<<18 + 5
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.first), func(t *testing.T) {
			testBlockLayout(t, tt.first, tt.n)
		})
	}
}

func testBlockLayout(t *testing.T, first, n int) {
	a := pool.New(first, 1)
	starts, sizes := layout(first, uint64(n)+1)
	blockOf := func(idx uint32) int { // the model's block for idx
		k := len(starts) - 1
		for uint64(idx) < starts[k] {
			k--
		}
		return k
	}

	// Bytes is O(blocks), so look at it only around block starts and at
	// a few points between: it changes exactly when a Get hands out the
	// first index of a block.
	checkBytes := func(when string, idx uint32, want int) {
		if b := a.Bytes(); b != want {
			t.Fatalf("%s index %d: Bytes = %d, want %d", when, idx, b, want)
		}
	}
	var growth []int // Bytes once each block exists
	for i := 1; i <= n; i++ {
		k := blockOf(uint32(i))
		boundary := uint64(i) == starts[k] || i == 1
		if boundary && i > 1 {
			checkBytes("before", uint32(i), growth[len(growth)-1])
		}
		idx, _, ok := a.Get(0)
		if !ok || idx != uint32(i) {
			t.Fatalf("Get %d = (%d, %v), want (%d, true)", i, idx, ok, i)
		}
		switch {
		case boundary:
			want := bytesFor(first, idx)
			checkBytes("after", idx, want)
			growth = append(growth, want)
		case uint64(idx) == starts[k]+sizes[k]-1 || idx%1000 == 0:
			checkBytes("after", idx, growth[len(growth)-1])
		}
		a.Node(idx).Key = uint64(idx)*0x9E3779B97F4A7C15 + 1
		a.Link(idx).Store(^idx)
	}
	hw := a.HighWater()
	require.Equal(t, uint32(n+1), hw)
	for idx := uint32(1); idx < hw; idx++ {
		a.Slot(idx).SetTask(pool.Task{Handler: uint16(idx) | 1})
	}

	// Every write survived: no two indices share storage.
	for idx := uint32(1); idx < hw; idx++ {
		if got := a.Node(idx).Key; got != uint64(idx)*0x9E3779B97F4A7C15+1 {
			t.Fatalf("Node(%d).Key = %#x: overwritten through another index", idx, got)
		}
		if got := a.Link(idx).Load(); got != ^idx {
			t.Fatalf("Link(%d) = %#x: overwritten through another index", idx, got)
		}
		if task, h := split(a.Task(idx)); task != nil || h != uint16(idx)|1 {
			t.Fatalf("Task(%d) = (%v, %d): overwritten through another index", idx, task != nil, h)
		}
	}

	// Node, Find and Link agree: the model's block of each index is one
	// array in both, indexed by the offset in the block; and no two blocks
	// overlap in any of them.
	type span struct{ lo, hi uintptr }
	var nodeSpans, linkSpans []span
	for k, start := range starts {
		start := uint32(max(start, 1)) // index 0 is never handed out
		end := uint32(min(starts[k]+sizes[k], uint64(hw)))
		n0 := uintptr(unsafe.Pointer(a.Node(start)))
		l0 := uintptr(unsafe.Pointer(a.Link(start)))
		for idx := start; idx < end; idx++ {
			d := uintptr(idx - start)
			node := a.Node(idx)
			if f := a.Find(idx); f != node {
				t.Fatalf("Find(%d) = %p, Node = %p", idx, f, node)
			}
			if uintptr(unsafe.Pointer(node)) != n0+32*d ||
				uintptr(unsafe.Pointer(a.Link(idx))) != l0+4*d {
				t.Fatalf("index %d is not element %d of block %d in both Node and Link", idx, d, k)
			}
		}
		d := uintptr(end - start)
		nodeSpans = append(nodeSpans, span{n0, n0 + 32*d})
		linkSpans = append(linkSpans, span{l0, l0 + 4*d})
	}
	for name, spans := range map[string][]span{"nodes": nodeSpans, "links": linkSpans} {
		for i := range spans {
			for j := range i {
				if spans[i].lo < spans[j].hi && spans[j].lo < spans[i].hi {
					t.Fatalf("%s of blocks %d and %d overlap", name, j, i)
				}
			}
		}
	}

	// Bytes: block 0, then one step per block. Blocks double the arena
	// until they reach max(2^14, block 0), then add that much each.
	require.Len(t, growth, len(starts))
	big := int(max(sizes[0], 1<<14)) * pool.BaseNodeBytes
	for k := 1; k < len(growth); k++ {
		step := growth[k] - growth[k-1]
		if growth[k-1] < big {
			assert.Equal(t, growth[k-1], step, "block %d must double the arena (%v)", k, growth)
		} else {
			assert.Equal(t, big, step, "block %d must add a full-size block (%v)", k, growth)
		}
	}
	// Every block now has its handler array too.
	assert.Equal(t, bytesFor(first, hw-1)/pool.BaseNodeBytes*(pool.BaseNodeBytes+pool.HandlerBytes), a.Bytes())
	t.Logf("first=%d: %d blocks, %d bytes for %d nodes", first, len(growth), a.Bytes(), n)

	// Nothing is found beyond the high-water mark.
	assert.Nil(t, a.Find(hw))
	assert.Nil(t, a.Find(hw+1))
	assert.Nil(t, a.Find(pool.MaxNodes-1))
	assert.Nil(t, a.Find(pool.MaxNodes))
	assert.Nil(t, a.Find(1<<31))
	assert.Nil(t, a.Find(^uint32(0)))
	assert.NotNil(t, a.Find(hw-1))
}

func TestReuse(t *testing.T) {
	a := pool.New(16, 2)
	idx := get(t, a, 0)
	hw := a.HighWater()

	for life := range 5 {
		called := false
		a.Slot(idx).SetTask(pool.Task{Func: func() { called = true }})
		a.Node(idx).Key = uint64(life)
		var c pool.Chain
		a.Add(&c, idx)
		task, h := split(a.Task(idx))
		assert.Nil(t, task, "Add must clear the task")
		assert.Zero(t, h)
		a.Slot(idx).SetTask(pool.Task{Handler: uint16(life + 1)})
		var c2 pool.Chain
		a.Add(&c2, idx)
		task, h = split(a.Task(idx))
		assert.Nil(t, task)
		assert.Zero(t, h, "Add must clear the handler")
		a.Node(idx).Epoch.Store(uint64(life))
		a.PutChain(0, &c)
		assert.Equal(t, pool.Chain{}, c, "PutChain empties the chain")

		idx2 := get(t, a, 0)
		require.Equal(t, idx, idx2, "freed node is reused (LIFO)")
		require.Equal(t, uint64(life), a.Node(idx2).Epoch.Load(), "the arena leaves the node's own fields alone")
		require.Equal(t, hw, a.HighWater(), "reuse does not grow the arena")
		assert.False(t, called)
	}

	// A second node is a fresh one.
	idx3 := get(t, a, 0)
	assert.NotEqual(t, idx, idx3)
	assert.Zero(t, a.Node(idx3).Epoch.Load())
	assert.Equal(t, hw+1, a.HighWater())
}

func TestLIFOPerLane(t *testing.T) {
	a := pool.New(0, 2)
	var idxs []uint32
	for range 6 {
		idx := get(t, a, 0)
		idxs = append(idxs, idx)
	}
	// Free the first three on lane 0 and the rest on lane 1, one chain
	// at a time: on each lane the last freed is the first reused.
	for i, idx := range idxs {
		put(a, i/3, idx)
	}
	for _, want := range []uint32{idxs[2], idxs[1], idxs[0]} {
		idx := get(t, a, 0)
		assert.Equal(t, want, idx, "lane 0")
	}
	for _, want := range []uint32{idxs[5], idxs[4], idxs[3]} {
		idx := get(t, a, 1)
		assert.Equal(t, want, idx, "lane 1")
	}
	assert.Equal(t, uint32(7), a.HighWater())
}

func TestStealFromOtherLane(t *testing.T) {
	a := pool.New(0, 4)
	idx := get(t, a, 1)
	hw := a.HighWater()
	put(a, 1, idx)

	for _, lane := range []int{0, 2, 3} {
		got := get(t, a, lane)
		assert.Equal(t, idx, got, "Get(%d) must steal from lane 1 before growing", lane)
		assert.Equal(t, hw, a.HighWater(), "stealing does not grow the arena")
		put(a, 1, idx)
	}

	// Lanes are taken modulo the lane count, for Get and PutChain.
	got := get(t, a, 5) // lane 1
	assert.Equal(t, idx, got)
	put(a, 6, idx) // lane 2
	got = get(t, a, 2)
	assert.Equal(t, idx, got, "PutChain(6) must use lane 2")

	// A lane prefers its own list, then scans the others in order.
	other := get(t, a, 0)
	assert.Equal(t, hw, other, "every list empty: Get grows")
	put(a, 0, other)
	put(a, 2, idx)
	got = get(t, a, 1) // scans 1, 2, 3, 0
	assert.Equal(t, idx, got, "lane 1 steals from lane 2 first")
	put(a, 2, idx)
	got = get(t, a, 2)
	assert.Equal(t, idx, got, "lane 2 takes its own node")
	got = get(t, a, 2)
	assert.Equal(t, other, got, "then steals from lane 0")
	assert.Equal(t, hw+1, a.HighWater())

	// With every list empty again, Get grows.
	fresh := get(t, a, 3)
	assert.Equal(t, hw+1, fresh)
	assert.Equal(t, hw+2, a.HighWater())
}

func TestChains(t *testing.T) {
	a := pool.New(8, 2)
	var c pool.Chain
	a.PutChain(0, &c) // an empty chain is a no-op
	assert.Equal(t, pool.Chain{}, c)
	assert.Equal(t, uint32(1), a.HighWater())

	const n = 50
	want := map[uint32]bool{}
	var all []uint32
	for range 2 * n {
		idx := get(t, a, 0)
		all = append(all, idx)
	}
	// Free every other node, in one chain.
	for i := 0; i < len(all); i += 2 {
		a.Slot(all[i]).SetTask(pool.Task{Func: func() {}})
		a.Add(&c, all[i])
		want[all[i]] = true
		assert.NotEqual(t, pool.Chain{}, c)
		task, _ := split(a.Task(all[i]))
		assert.Nil(t, task)
	}
	hw := a.HighWater()
	a.PutChain(1, &c)
	assert.Equal(t, pool.Chain{}, c, "PutChain resets the chain")

	got := map[uint32]bool{}
	for range n {
		idx := get(t, a, 0)
		require.False(t, got[idx], "index %d handed out twice", idx)
		got[idx] = true
	}
	assert.Equal(t, want, got, "Gets return exactly the freed nodes")
	assert.Equal(t, hw, a.HighWater(), "no fresh index before the free lists are empty")

	idx := get(t, a, 0)
	assert.Equal(t, hw, idx, "then the arena grows")

	// Two chains pushed onto the same lane are both kept, the later one
	// on top; a chain keeps its order (the last added comes out first).
	var c1, c2 pool.Chain
	for i := range 4 {
		a.Add(&c1, all[2*i])
		a.Add(&c2, all[2*i+1])
	}
	a.PutChain(0, &c1)
	a.PutChain(0, &c2)
	var order []uint32
	for range 8 {
		idx := get(t, a, 1)
		order = append(order, idx)
	}
	assert.Equal(t, []uint32{all[7], all[5], all[3], all[1], all[6], all[4], all[2], all[0]}, order)
	assert.Equal(t, hw+1, a.HighWater())
}

// TestConcurrentGrow has many goroutines grow a fresh arena at once, so that
// they race to install the same blocks, while a reader looks nodes up with
// Find. Every index must be handed out once, backed by one node.
func TestConcurrentGrow(t *testing.T) {
	prev := runtime.GOMAXPROCS(4)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	const workers = 8
	perWorker := 4000
	if testing.Short() {
		perWorker = 1000
	}
	a := pool.New(64, workers)
	got := make([][]uint32, workers)
	var wg sync.WaitGroup
	var stop atomic.Bool
	var readerErr atomic.Value
	readerDone := make(chan struct{})
	go func() { // Find must be safe against concurrent growth
		defer close(readerDone)
		for !stop.Load() {
			hw := a.HighWater()
			for idx := uint32(1); idx < hw; idx += 7 {
				if n := a.Find(idx); n != nil && n.State.Load() > 1 {
					readerErr.Store(fmt.Sprintf("node %d handed out %d times", idx, n.State.Load()))
				}
			}
			if a.Find(hw+1) != nil && hw+1 >= a.HighWater() {
				readerErr.Store("Find beyond HighWater")
			}
			runtime.Gosched()
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				idx, _, ok := a.Get(w)
				if !ok {
					return // caught below: too few indices
				}
				if a.Node(idx).State.Add(1) != 1 { // counts handouts: each index once
					return
				}
				a.Node(idx).Key = uint64(w)<<32 | uint64(i)
				got[w] = append(got[w], idx)
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	<-readerDone
	require.Nil(t, readerErr.Load())

	total := workers * perWorker
	require.Equal(t, uint32(total+1), a.HighWater())
	seen := make([]bool, total+1)
	for w := range workers {
		require.Len(t, got[w], perWorker)
		for i, idx := range got[w] {
			require.NotZero(t, idx)
			require.False(t, seen[idx], "index %d handed out twice", idx)
			seen[idx] = true
			require.Equal(t, uint64(w)<<32|uint64(i), a.Find(idx).Key, "index %d", idx)
		}
	}
	assert.Equal(t, bytesFor(64, uint32(total)), a.Bytes(), "losers of an install race must not leave blocks behind")
}

// TestConcurrentGetPut runs producers that Get nodes and hand them to a single
// owner goroutine, which frees them in chains on alternating lanes. It checks
// that no index is held twice at once, that each handout starts a life that
// the owner ends once, and that nodes are reused rather than leaked.
func TestConcurrentGetPut(t *testing.T) {
	forEachProcs(t, func(t *testing.T, _ int) {
		testConcurrentGetPut(t)
	})
}

func testConcurrentGetPut(t *testing.T) {
	const (
		lanes   = 4
		batch   = 16 // owner frees in chains of this many
		chanCap = 32
		maxIdx  = 1 << 16
	)
	producers, perProducer := 8, 5000
	if testing.Short() {
		producers, perProducer = 4, 1000
	}
	a := pool.New(64, lanes)

	var (
		holder  [maxIdx]atomic.Int32  // 0 = free, p+1 = producer p, -1 = owner
		lastGen [maxIdx]atomic.Uint64 // lives each index has had
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

	type handoff struct {
		idx uint32
		gen uint64
	}
	ch := make(chan handoff, chanCap)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perProducer {
				idx, _, ok := a.Get(p)
				if !ok {
					fail("Get failed")
					return
				}
				if idx == 0 || idx >= maxIdx {
					fail("index out of range")
					return
				}
				if !holder[idx].CompareAndSwap(0, int32(p+1)) {
					fail("index handed to two goroutines at once")
				}
				gen := lastGen[idx].Add(1) // this handout's life
				// Use the node as a producer would.
				a.Node(idx).Key = uint64(idx)<<32 | uint64(gen)
				if idx%2 == 0 {
					a.Slot(idx).SetTask(pool.Task{Func: func() {}})
				} else {
					a.Slot(idx).SetTask(pool.Task{Handler: uint16(idx) | 1})
				}
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
	lane, puts, inChain := 0, 0, 0
	for h := range ch {
		if holder[h.idx].Load() != -1 {
			fail("owner received a node it does not hold")
		}
		if a.Node(h.idx).Key != uint64(h.idx)<<32|uint64(h.gen) {
			fail("node changed while in transit")
		}
		if task, hd := split(a.Task(h.idx)); (task == nil) != (h.idx%2 == 1) || (h.idx%2 == 1 && hd != uint16(h.idx)|1) {
			fail("task lost in transit")
		}
		// Release before Add: once PutChain runs, a producer may take it.
		if !holder[h.idx].CompareAndSwap(-1, 0) {
			fail("owner lost the node")
		}
		a.Add(&c, h.idx)
		inChain++
		if task, hd := split(a.Task(h.idx)); task != nil || hd != 0 {
			fail("Add did not clear the task")
		}
		if inChain == batch {
			a.PutChain(lane, &c)
			lane = (lane + 1) % lanes
			puts++
			inChain = 0
		}
	}
	a.PutChain(lane, &c)
	require.Zero(t, bad.Load(), "%v", errs)
	require.Greater(t, puts, 0)

	// Nodes outside the free lists at any moment: at most one per producer,
	// chanCap in the channel, one in the owner's hand, batch-1 in the chain.
	// Allow slack for Gets that miss a lane refilled while they scan.
	inFlight := producers + chanCap + 1 + batch
	used := int(a.HighWater() - 1)
	t.Logf("high water %d after %d Gets (in flight bound %d)", used, producers*perProducer, inFlight)
	assert.LessOrEqual(t, used, 2*inFlight+lanes*batch, "nodes leaked: arena grew instead of reusing")

	// Every node is back on some free list: Getting them all does not grow
	// the arena and returns each index in [1, hw) exactly once.
	hw := a.HighWater()
	seen := map[uint32]bool{}
	for range used {
		idx := get(t, a, 0)
		require.False(t, seen[idx], "index %d twice", idx)
		seen[idx] = true
		require.NotZero(t, lastGen[idx].Load(), "index %d was handed out before", idx)
	}
	assert.Equal(t, hw, a.HighWater(), "a node was lost from the free lists")
	idx := get(t, a, 0)
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
		idx := get(t, a, 0)
		a.Add(&c, idx)
	}
	a.PutChain(0, &c)
	require.Equal(t, uint32(nodes+1), a.HighWater())

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
					if !ok || idx == 0 || idx >= maxIdx {
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
	for range hw - 1 {
		idx := get(t, a, 0)
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
	cycle() // allocates the first two blocks (64 nodes need indices 1..64)
	hw, bytes := a.HighWater(), a.Bytes()
	allocs := testing.AllocsPerRun(100, cycle)
	assert.Zero(t, allocs, "steady-state Get/Add/PutChain must not allocate")
	assert.Equal(t, hw, a.HighWater(), "steady state must reuse nodes")
	assert.Equal(t, bytes, a.Bytes())
}

func BenchmarkGetPut(b *testing.B) {
	a := pool.New(0, 1)
	var c pool.Chain
	for range 64 { // warm up: allocate the blocks and fill the list
		idx, _, _ := a.Get(0)
		a.Add(&c, idx)
	}
	a.PutChain(0, &c)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for range b.N {
		idx, _, ok := a.Get(0)
		if !ok {
			b.Fatal("Get failed")
		}
		a.Add(&c, idx)
		if n++; n == 64 {
			a.PutChain(0, &c)
			n = 0
		}
	}
	b.StopTimer()
	if hw := a.HighWater(); hw > 129 {
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
		n := 0
		for pb.Next() {
			idx, _, ok := a.Get(lane)
			if !ok {
				panic("Get failed")
			}
			a.Add(&c, idx)
			if n++; n == 64 {
				mu.Lock()
				a.PutChain(lane, &c)
				mu.Unlock()
				n = 0
			}
		}
		mu.Lock()
		a.PutChain(lane, &c)
		mu.Unlock()
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// split returns a task's closure and handler number.
func split(t pool.Task) (func(), uint16) { return t.Func, t.Handler }

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
