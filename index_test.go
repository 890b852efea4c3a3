package shardwheel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// connKey is a struct key, as a caller with a composite identity uses.
type connKey struct {
	addr string
	port int
}

// TestIndexKeysOfAnyComparableType: string and struct keys, each with a
// timer of its own, found by Lookup and listed once each by All; keys
// that differ are never confused, whatever their hashes.
func TestIndexKeysOfAnyComparableType(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(3))
	byName := shardwheel.NewIndex[string](s)
	byConn := shardwheel.NewIndex[connKey](s)
	const n = 2000
	names := map[string]shardwheel.Timer{}
	conns := map[connKey]shardwheel.Timer{}
	for i := range n {
		name := fmt.Sprintf("session-%d", i)
		tm, err := byName.AfterFunc(name, time.Hour, noop)
		require.NoError(t, err)
		names[name] = tm
		c := connKey{addr: "10.0.0." + fmt.Sprint(i%7), port: i}
		tm, err = byConn.AfterFunc(c, time.Hour, noop)
		require.NoError(t, err)
		conns[c] = tm
	}
	for name, want := range names {
		got, ok := byName.Lookup(name)
		require.True(t, ok, name)
		require.Equal(t, want, got, name)
	}
	for c, want := range conns {
		got, ok := byConn.Lookup(c)
		require.True(t, ok, "%v", c)
		require.Equal(t, want, got, "%v", c)
	}
	_, ok := byName.Lookup("session-x")
	assert.False(t, ok)
	_, ok = byConn.Lookup(connKey{addr: "10.0.0.1", port: 0}) // port 0 has addr .0
	assert.False(t, ok)
	assert.Equal(t, n, byName.Len())
	assert.Equal(t, n, byConn.Len())

	seen := map[string]int{}
	for name, tm := range byName.All() {
		seen[name]++
		assert.Equal(t, names[name], tm, name)
	}
	assert.Len(t, seen, n)
	for name, count := range seen {
		assert.Equal(t, 1, count, name)
	}

	// Cancel half by key; the others stay, and All and Len follow.
	for i := 0; i < n; i += 2 {
		require.True(t, byName.Cancel(fmt.Sprintf("session-%d", i)))
	}
	assert.Equal(t, n/2, byName.Len())
	left := 0
	for name := range byName.All() {
		left++
		assert.True(t, names[name].Pending(), name)
	}
	assert.Equal(t, n/2, left)
	assert.Equal(t, n+n/2, s.Pending())
}

// TestIndexesAreIndependent: two Indexes of one Scheduler with the same
// keys keep a timer each; one's calls never reach the other's timers.
func TestIndexesAreIndependent(t *testing.T) {
	s := newScheduler(t)
	a, b := shardwheel.NewIndex[uint64](s), shardwheel.NewIndex[uint64](s)
	ta, err := a.AfterFunc(1, time.Hour, noop)
	require.NoError(t, err)
	tb, err := b.AfterFunc(1, time.Hour, noop)
	require.NoError(t, err)
	assert.True(t, ta.Pending(), "b's AfterFunc replaced a's timer")
	require.True(t, a.Cancel(1))
	assert.True(t, tb.Pending())
	got, ok := b.Lookup(1)
	require.True(t, ok)
	assert.Equal(t, tb, got)
	require.Eventually(t, func() bool { return indexLen(a) == 0 && indexLen(b) == 1 }, waitFor, pollEvery)
}

// TestIndexAllStopsAndAllowsCalls: a loop over All may break, and may
// call the Index: cancelling each timer it is given empties the index.
func TestIndexAllStopsAndAllowsCalls(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	ix := shardwheel.NewIndex[int](s)
	for i := range 100 {
		_, err := ix.AfterFunc(i, time.Hour, noop)
		require.NoError(t, err)
	}
	visits := 0
	for range ix.All() {
		visits++
		if visits == 10 {
			break
		}
	}
	assert.Equal(t, 10, visits)
	for k, tm := range ix.All() {
		require.True(t, ix.Cancel(k))
		assert.False(t, tm.Pending())
	}
	assert.Zero(t, ix.Len())
	for k := range ix.All() {
		t.Errorf("key %d listed after every timer was cancelled", k)
	}
	require.Eventually(t, func() bool { return indexLen(ix) == 0 }, waitFor, pollEvery)
}

// TestIndexEvery: a series as a key's timer runs period after period,
// Lookup finds it, Reset restarts its grid, AfterFunc on its key
// replaces it (no run after), and Cancel ends a series; its entries go
// when it ends.
func TestIndexEvery(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	ix := shardwheel.NewIndex[string](s)
	var runs atomic.Int32
	series, err := ix.Every("poll", 2*time.Millisecond, func() { runs.Add(1) }, shardwheel.OnMissed(shardwheel.SkipMissed))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return runs.Load() >= 3 }, waitFor, pollEvery)
	got, ok := ix.Lookup("poll")
	require.True(t, ok)
	assert.Equal(t, series, got)
	assert.True(t, ix.Reset("poll", time.Hour), "Reset restarts the series' grid")
	assert.True(t, series.Pending())

	// Replacing the series ends it: CancelWait says no run is left.
	var once atomic.Int32
	next, err := ix.AfterFunc("poll", time.Hour, func() { once.Add(1) })
	require.NoError(t, err)
	assert.False(t, series.Pending(), "the replaced series ended")
	cancelled, err := series.CancelWait(context.Background())
	require.NoError(t, err)
	assert.False(t, cancelled, "already ended by the replacement")
	got, _ = ix.Lookup("poll")
	assert.Equal(t, next, got)

	// A series with ByKey runs on the key's shard; Cancel ends it.
	var shard atomic.Int64
	shard.Store(-1)
	keyed, err := ix.Every("keyed", time.Millisecond, func() { shard.Store(int64(shardwheel.RunningShard(s))) },
		shardwheel.ByKey(7))
	require.NoError(t, err)
	assert.Equal(t, uint64(7), keyed.Key())
	require.Eventually(t, func() bool { return shard.Load() >= 0 }, waitFor, pollEvery)
	assert.EqualValues(t, s.ShardOf(7), shard.Load())
	require.True(t, ix.Cancel("keyed"))
	assert.False(t, keyed.Pending())
	require.True(t, ix.Cancel("poll"))
	require.Eventually(t, func() bool { return indexLen(ix) == 0 }, waitFor, pollEvery)
	assert.Zero(t, once.Load())
}

// TestIndexOptionsAndErrors: an Index's calls take the Scheduler's
// options and refuse what does not apply, naming the call; nil tasks, a
// period under the tick and calls after Stop return the sentinels; a
// refused call replaces nothing.
func TestIndexOptionsAndErrors(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithTick(time.Millisecond))
	require.NoError(t, err)
	ix := shardwheel.NewIndex[string](s)
	old, err := ix.AfterFunc("k", time.Hour, noop)
	require.NoError(t, err)

	_, err = ix.AfterFunc("k", time.Second, noop, shardwheel.OnMissed(shardwheel.BurstMissed))
	require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
	assert.Contains(t, err.Error(), "Index.AfterFunc")
	assert.Contains(t, err.Error(), "OnMissed")
	_, err = ix.Every("k", time.Second, noop, shardwheel.Slack(time.Millisecond))
	require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
	assert.Contains(t, err.Error(), "Index.Every")
	_, err = ix.Every("k", time.Microsecond, noop)
	assert.ErrorIs(t, err, shardwheel.ErrBadPeriod)
	_, err = ix.AfterFunc("k", time.Second, nil)
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)
	_, err = ix.Every("k", time.Second, nil)
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)
	got, ok := ix.Lookup("k")
	require.True(t, ok, "a refused call replaced the key's timer")
	assert.Equal(t, old, got)

	// Slack applies: the timer runs within its window, never early.
	var ranAt atomic.Int64
	start := time.Now()
	_, err = ix.AfterFunc("slack", 5*time.Millisecond, func() { ranAt.Store(time.Since(start).Nanoseconds()) },
		shardwheel.Slack(20*time.Millisecond))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ranAt.Load() != 0 }, waitFor, pollEvery)
	assert.GreaterOrEqual(t, time.Duration(ranAt.Load()), 5*time.Millisecond, "ran early")

	left := s.Stop()
	assert.Contains(t, left, old)
	assert.Zero(t, ix.Len(), "Stop empties the index")
	_, ok = ix.Lookup("k")
	assert.False(t, ok)
	_, err = ix.AfterFunc("k", time.Second, noop)
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
	_, err = ix.Every("k", time.Second, noop)
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
}

// TestIndexCallsAllocateNothing: in steady state (the maps grown to the
// keys, the arena warm) no call allocates, with or without ByKey, one-shot
// or series (the closure is the caller's).
func TestIndexCallsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s := newScheduler(t)
	ix := shardwheel.NewIndex[uint64](s)
	var key uint64
	calls := []struct {
		name string
		call func()
	}{
		{"AfterFunc", func() { _, _ = ix.AfterFunc(key%64, time.Hour, noop) }},
		{"AfterFunc ByKey", func() { _, _ = ix.AfterFunc(key%64, time.Hour, noop, shardwheel.ByKey(key%7)) }},
		{"AfterFunc Slack", func() { _, _ = ix.AfterFunc(key%64, time.Hour, noop, shardwheel.Slack(time.Second)) }},
		{"Reset and Lookup", func() { ix.Reset(key%64, time.Hour); _, _ = ix.Lookup(key % 64) }},
		{"Cancel", func() { ix.Cancel(key % 64) }},
		{"Len", func() { _ = ix.Len() }},
		{"Every", func() { _, _ = ix.Every(key%64, time.Hour, noop) }}, // last: a series' Reset makes a grid
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			for range 4096 { // warm the maps, the arena and the pools
				c.call()
				key++
			}
			// Enough runs to span several ticks: a replaced series' record
			// comes back when the shard frees its node, which a sweep does
			// at its own pace, not at the Cancel.
			assert.Zero(t, testing.AllocsPerRun(20000, func() { c.call(); key++ }))
		})
	}
}

// ExampleNewIndex keeps one idle timeout per session name: a second
// AfterFunc on a name replaces its timer, and All lists what is pending.
func ExampleNewIndex() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	sessions := shardwheel.NewIndex[string](s)
	for _, name := range []string{"alice", "bob", "alice"} {
		if _, err := sessions.AfterFunc(name, time.Minute, func() { fmt.Println(name, "idle") }); err != nil {
			panic(err) // ErrStopped or ErrTooManyPending
		}
	}
	fmt.Println("sessions:", sessions.Len())
	fmt.Println("bob logged out:", sessions.Cancel("bob"))
	for name := range sessions.All() {
		fmt.Println("pending:", name)
	}
	// Output:
	// sessions: 2
	// bob logged out: true
	// pending: alice
}

// TestIndexKeysWhoseHashesCollide: keys whose hashes are equal (forced:
// every key of the Index hashes alike) keep a timer each, and every call
// tells them apart: Lookup, Reset, Cancel, replacing, All and Len, timers
// that run or are cancelled through their handles, with and without
// ByKey, from several goroutines. At quiescence each key has at most one
// pending timer and the index holds exactly the pending ones.
func TestIndexKeysWhoseHashesCollide(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	ix := shardwheel.NewIndex[string](s)
	shardwheel.CollideKeys(ix, 42)
	const keys = 12
	name := func(i int) string { return fmt.Sprintf("key-%d", i) }
	first := map[string]shardwheel.Timer{}
	for i := range keys {
		tm, err := ix.AfterFunc(name(i), time.Hour, noop)
		require.NoError(t, err)
		first[name(i)] = tm
	}
	assert.Equal(t, keys, ix.Len())
	for k, want := range first {
		got, ok := ix.Lookup(k)
		require.True(t, ok, k)
		require.Equal(t, want, got, k)
	}
	require.True(t, ix.Cancel(name(3)))
	assert.True(t, first[name(4)].Pending(), "cancelling a key cancelled another of its hash")
	assert.True(t, ix.Reset(name(5), 2*time.Hour))
	_, ok := ix.Lookup(name(3))
	assert.False(t, ok)
	assert.Equal(t, keys-1, indexLen(ix))

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for range 2000 {
				k := name(rng.IntN(keys))
				d := []time.Duration{0, time.Millisecond, time.Hour}[rng.IntN(3)]
				switch rng.IntN(5) {
				case 0:
					_, _ = ix.AfterFunc(k, d, noop)
				case 1:
					_, _ = ix.AfterFunc(k, d, noop, shardwheel.ByKey(uint64(rng.IntN(4))))
				case 2:
					ix.Cancel(k)
				case 3:
					if tm, ok := ix.Lookup(k); ok {
						tm.Cancel() // through the handle: the shard drops the entry
					}
				default:
					ix.Reset(k, d)
				}
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		pending := 0
		for i := range keys {
			if tm, ok := ix.Lookup(name(i)); ok {
				if time.Until(tm.Deadline()) < 30*time.Minute {
					return false // still running down
				}
				pending++
			}
		}
		return pending == s.Pending() && indexLen(ix) == pending && ix.Len() == pending
	}, waitFor, pollEvery, "the index holds exactly the pending timers, one per key")
	listed := map[string]int{}
	for k, tm := range ix.All() {
		listed[k]++
		got, ok := ix.Lookup(k)
		require.True(t, ok, k)
		assert.Equal(t, got, tm, k)
	}
	assert.Len(t, listed, s.Pending())
	for k, n := range listed {
		assert.Equal(t, 1, n, k)
	}
	s.Stop()
	assert.Zero(t, indexLen(ix))
}

// TestZeroIndexPanicsClearly: a zero Index's calls panic with a message
// that says what to do, not with a nil dereference.
func TestZeroIndexPanicsClearly(t *testing.T) {
	var ix shardwheel.Index[string]
	const want = "shardwheel: use NewIndex to create an Index"
	assert.PanicsWithValue(t, want, func() { _, _ = ix.AfterFunc("k", time.Second, noop) })
	assert.PanicsWithValue(t, want, func() { _, _ = ix.Every("k", time.Second, noop) })
	assert.PanicsWithValue(t, want, func() { ix.Cancel("k") })
	assert.PanicsWithValue(t, want, func() { ix.Reset("k", time.Second) })
	assert.PanicsWithValue(t, want, func() { _, _ = ix.Lookup("k") })
	assert.PanicsWithValue(t, want, func() { ix.Len() })
	assert.PanicsWithValue(t, want, func() { ix.All() })
}

// TestIndexEntriesOfTimersThatRunAtOnceGo: timers due at once, on fresh
// keys, routed by their hash or by ByKey, colliding or not, often end
// before their call has stored their entries; once they have all run the
// index holds nothing. (The stress tag's pauses make the windows wide.)
func TestIndexEntriesOfTimersThatRunAtOnceGo(t *testing.T) {
	for _, collide := range []bool{false, true} {
		t.Run(fmt.Sprintf("collide=%v", collide), func(t *testing.T) {
			s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
			ix := shardwheel.NewIndex[int](s)
			if collide {
				shardwheel.CollideKeys(ix, 7)
			}
			var ran atomic.Int64
			const each = 300
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range each {
						var opts []shardwheel.TimerOption
						if i%2 == 0 {
							opts = append(opts, shardwheel.ByKey(uint64(i%5)))
						}
						_, err := ix.AfterFunc(g*each+i, 0, func() { ran.Add(1) }, opts...)
						assert.NoError(t, err)
					}
				})
			}
			wg.Wait()
			require.Eventually(t, func() bool {
				entries, routed, strays, mismatch := shardwheel.IndexEntries(ix)
				return ran.Load() == 4*each && entries == 0 && routed == 0 && strays == 0 && !mismatch && ix.Len() == 0
			}, waitFor, pollEvery, "entries left behind by timers that ran")
		})
	}
}
