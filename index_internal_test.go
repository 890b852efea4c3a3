package shardwheel

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/shard"
)

// TestIndexPadding checks that each shard's part of an Index has a whole
// cache line of padding on either side of its map pointer, and its count
// a line of its own, so that two shards' indexed calls, the count's
// writes, or anything allocated beside the slice, never share the
// pointer's line.
func TestIndexPadding(t *testing.T) {
	var keys indexKeys[string]
	assert.GreaterOrEqual(t, unsafe.Offsetof(keys.m), uintptr(pad.CacheLineSize))
	assert.GreaterOrEqual(t, unsafe.Offsetof(keys.n)-unsafe.Offsetof(keys.m)-unsafe.Sizeof(keys.m), uintptr(pad.CacheLineSize))
	assert.GreaterOrEqual(t, unsafe.Sizeof(keys)-unsafe.Offsetof(keys.n), uintptr(pad.CacheLineSize), "the count has a line of its own")
	var names indexRouted[string]
	assert.GreaterOrEqual(t, unsafe.Offsetof(names.m), uintptr(pad.CacheLineSize))
	assert.GreaterOrEqual(t, unsafe.Sizeof(names)-unsafe.Offsetof(names.m)-unsafe.Sizeof(names.m), uintptr(pad.CacheLineSize))
}

// TestTimerEndedBeforeIndexedLeavesNoEntry covers the window between
// an Index's two steps: the timer is accepted, and ends (it runs, it is
// cancelled through its handle, Stop returns it) before add stores its
// entries. The worker found nothing to unindex then, so add must not leave
// the entry behind.
func TestTimerEndedBeforeIndexedLeavesNoEntry(t *testing.T) {
	for _, end := range []string{"ran", "cancelled", "stopped"} {
		t.Run(end, func(t *testing.T) {
			s, err := New(WithShards(1), WithTick(time.Millisecond))
			require.NoError(t, err)
			defer s.Stop()
			ix := NewIndex[uint64](s)
			ran := make(chan struct{})
			delay := time.Hour
			if end == "ran" {
				delay = 0
			}
			r := s.request(1, delay, shard.Task{Func: func() { close(ran) }})
			r.Indexed = true
			tm, err := s.scheduleOn(s.shards[0], &r)
			require.NoError(t, err)
			switch end {
			case "ran":
				<-ran
			case "cancelled":
				require.True(t, tm.Cancel())
			case "stopped":
				require.Len(t, s.Stop(), 1)
			}
			// Whether or not the worker has freed the node yet, the
			// entry must be gone as soon as add returns.
			got, err := ix.add(1, ix.hashOf(1), func() (Timer, error) { return tm, nil })
			require.NoError(t, err)
			require.Equal(t, tm, got)
			entries, routed, _, _ := IndexEntries(ix)
			assert.Zero(t, entries+routed, "add left an entry for a timer that had ended")
			_, found := ix.Lookup(1)
			assert.False(t, found)
		})
	}
}

// TestTaskRearmingItsKeyWaitsForItsTimersEntry: an indexed timer's task
// that re-arms its own key may run before the AfterFunc that made the
// timer has stored its entry. The test holds that AfterFunc there, between
// scheduling the timer and storing its entry, until the task has started
// and its own AfterFunc is parked on the key's bucket lock (failing if
// that call gets through instead). Once the entry is stored, the task's
// call replaces it: the re-armed timer is pending and indexed, not
// cancelled by the entry of the timer whose task made it.
func TestTaskRearmingItsKeyWaitsForItsTimersEntry(t *testing.T) {
	s, err := New(WithShards(1), WithTick(time.Millisecond))
	require.NoError(t, err)
	defer s.Stop()
	ix := NewIndex[uint64](s)
	const k = 5
	taskG := make(chan uint64, 1)
	type result struct {
		tm  Timer
		err error
	}
	rearmed := make(chan result, 1)
	task := func() {
		taskG <- shard.GoroutineID()
		next, err := ix.AfterFunc(k, time.Hour, func() {})
		rearmed <- result{next, err}
	}
	var held string // why add could not be held where the test wants it
	var early *result
	first, err := ix.add(k, ix.hash(k), func() (Timer, error) {
		r := s.request(ix.hash(k), 0, shard.Task{Func: task})
		r.Indexed, r.Routed = true, true
		tm, err := s.scheduleOn(s.shards[0], &r)
		if err != nil {
			return tm, err
		}
		// No FailNow here: this runs under the bucket lock, which the
		// task's call needs.
		var g uint64
		select {
		case g = <-taskG:
		case <-time.After(waitFor):
			held = "the task never ran"
			return tm, nil
		}
		for deadline := time.Now().Add(waitFor); ; time.Sleep(100 * time.Microsecond) {
			select {
			case res := <-rearmed:
				early, held = &res, "the task's AfterFunc returned before this timer's entry was stored"
				return tm, nil
			default:
			}
			if parkedInAdd(g) {
				return tm, nil
			}
			if time.Now().After(deadline) {
				held = "the task's AfterFunc never parked on the bucket lock"
				return tm, nil
			}
		}
	})
	require.NoError(t, err)
	require.Empty(t, held)
	res := early
	if res == nil {
		select {
		case r := <-rearmed:
			res = &r
		case <-time.After(waitFor):
			t.Fatal("the task's AfterFunc never returned")
		}
	}
	require.NoError(t, res.err)
	assert.False(t, first.Pending(), "the first timer ran")
	require.True(t, res.tm.Pending(), "the re-armed timer was cancelled")
	got, ok := ix.Lookup(k)
	require.True(t, ok, "the key lost its timer")
	assert.Equal(t, res.tm, got)
	require.True(t, ix.Cancel(k))
	entries, routed, _, _ := IndexEntries(ix)
	assert.Zero(t, entries+routed)
}

// waitFor bounds what this file's tests wait for; only a failing test
// reaches it.
const waitFor = 10 * time.Second

// parkedInAdd reports whether goroutine g is parked on a sync.Mutex inside
// Index.add: an indexed call waiting for a bucket lock.
func parkedInAdd(g uint64) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	prefix := fmt.Sprintf("goroutine %d [sync.Mutex.Lock", g)
	for _, stack := range strings.Split(string(buf), "\n\n") {
		if strings.HasPrefix(stack, prefix) {
			return strings.Contains(stack, "(*Index[...]).add")
		}
	}
	return false
}
