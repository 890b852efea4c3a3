package shardwheel

import (
	"reflect"
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

// TestIndexPadding checks that each stripe of an Index has a whole cache
// line of padding on either side of its lock, maps and count, so that
// calls on two stripes, or anything allocated beside the slices, never
// write a common line.
func TestIndexPadding(t *testing.T) {
	var keys keyStripe[string]
	assert.GreaterOrEqual(t, unsafe.Offsetof(keys.mu), uintptr(pad.CacheLineSize))
	assert.GreaterOrEqual(t, unsafe.Sizeof(keys)-unsafe.Offsetof(keys.n)-unsafe.Sizeof(keys.n), uintptr(pad.CacheLineSize))
	var names routedStripe[string]
	assert.GreaterOrEqual(t, unsafe.Offsetof(names.mu), uintptr(pad.CacheLineSize))
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
// that re-arms its own key may be due before the AfterFunc that made the
// timer has stored its entry. The test holds that AfterFunc there,
// between scheduling the timer and storing its entry, until one of the
// two things that may wait for the entry's stripe lock does: the task's
// own AfterFunc, or the shard goroutine freeing the timer's node (it
// drops the entries of an ended timer, and frees the node before it hands
// the task over). Once the entry is stored, the task's call replaces it:
// the re-armed timer is pending and indexed, not cancelled by the entry
// of the timer whose task made it.
func TestTaskRearmingItsKeyWaitsForItsTimersEntry(t *testing.T) {
	s, err := New(WithShards(1), WithTick(time.Millisecond))
	require.NoError(t, err)
	defer s.Stop()
	ix := NewIndex[uint64](s)
	const k = 5
	type result struct {
		tm  Timer
		err error
	}
	rearmed := make(chan result, 1)
	task := func() {
		next, err := ix.AfterFunc(k, time.Hour, func() {})
		rearmed <- result{next, err}
	}
	var held string // why add could not be held where the test wants it
	first, err := ix.add(k, ix.hash(k), func() (Timer, error) {
		r := s.request(ix.hash(k), 0, shard.Task{Func: task})
		r.Indexed, r.Routed = true, true
		tm, err := s.scheduleOn(s.shards[0], &r)
		if err != nil {
			return tm, err
		}
		// No FailNow here: this runs under the stripe lock.
		for deadline := time.Now().Add(waitFor); ; time.Sleep(100 * time.Microsecond) {
			select {
			case <-rearmed:
				held = "the task's AfterFunc returned before this timer's entry was stored"
				return tm, nil
			default:
			}
			if parkedOnIndexLock("(*Index[...]).add") || parkedOnIndexLock("(*Index[...]).unindex") {
				return tm, nil
			}
			if time.Now().After(deadline) {
				held = "neither the task's AfterFunc nor the shard goroutine parked on the stripe lock"
				return tm, nil
			}
		}
	})
	require.NoError(t, err)
	require.Empty(t, held)
	var res result
	select {
	case res = <-rearmed:
	case <-time.After(waitFor):
		t.Fatal("the task's AfterFunc never returned")
	}
	require.NoError(t, res.err)
	assert.False(t, first.Pending(), "the first timer ran")
	require.True(t, res.tm.Pending(), "the re-armed timer was cancelled")
	got, ok := ix.Lookup(k)
	require.True(t, ok, "the key lost its timer")
	assert.Equal(t, res.tm, got)
	require.True(t, ix.Cancel(k))
	require.Eventually(t, func() bool {
		entries, routed, _, _ := IndexEntries(ix)
		return entries+routed == 0
	}, waitFor, time.Millisecond)
}

// waitFor bounds what this file's tests wait for; only a failing test
// reaches it.
const waitFor = 10 * time.Second

// parkedOnIndexLock reports whether a goroutine is parked on a
// sync.Mutex with fn on its stack: a call waiting for an Index's stripe
// lock.
func parkedOnIndexLock(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, stack := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(stack, "[sync.Mutex.Lock") && strings.Contains(stack, fn) {
			return true
		}
	}
	return false
}

// TestIndexGivesASpikeBack: a Go map never shrinks, so a stripe remakes
// its maps once they hold an eighth of their peak: after a spike of keys
// (ByKey ones too, whose routed entries have a map of their own) is
// cancelled, every stripe's maps are new ones, and the Index still works.
func TestIndexGivesASpikeBack(t *testing.T) {
	s, err := New(WithShards(2), WithTick(time.Millisecond))
	require.NoError(t, err)
	defer s.Stop()
	ix := NewIndex[uint64](s)
	const keys = 64 * shrinkFloor
	for k := range uint64(keys) {
		_, err := ix.AfterFunc(k, time.Hour, func() {}, ByKey(k%3))
		require.NoError(t, err)
	}
	before := map[int]unsafe.Pointer{}
	for i := range ix.keys {
		require.GreaterOrEqual(t, ix.keys[i].peak, shrinkFloor, "keys spread over the stripes")
		before[i] = reflect.ValueOf(ix.keys[i].first).UnsafePointer()
	}
	routedBefore := reflect.ValueOf(ix.routed[0].m).UnsafePointer()
	require.GreaterOrEqual(t, ix.routed[0].peak, shrinkFloor)
	for k := range uint64(keys) {
		require.True(t, ix.Cancel(k))
	}
	for i := range ix.keys {
		assert.NotEqual(t, before[i], reflect.ValueOf(ix.keys[i].first).UnsafePointer(), "stripe %d's map was not remade", i)
		assert.Less(t, ix.keys[i].peak, shrinkFloor, "remade at its size, below the floor")
		assert.Empty(t, ix.keys[i].first)
	}
	assert.NotEqual(t, routedBefore, reflect.ValueOf(ix.routed[0].m).UnsafePointer(), "the routed map was not remade")
	assert.Zero(t, ix.Len())
	_, err = ix.AfterFunc(1, time.Hour, func() {})
	require.NoError(t, err)
	_, ok := ix.Lookup(1)
	assert.True(t, ok)
}
