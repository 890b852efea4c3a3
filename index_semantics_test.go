package shardwheel_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// keyedRun is a scheduler and the timers one semantics case made, by name:
// the handle each call returned and whether its task ran.
type keyedRun struct {
	t      *testing.T
	s      *shardwheel.Scheduler
	ix     *shardwheel.Index[uint64]
	timers map[string]shardwheel.Timer
	ran    map[string]*atomic.Int32
}

// step is one call of a semantics case and what it must return.
type step struct {
	do   string // schedule-key, schedule, cancel-key, reset-key, lookup, cancel, wait-ran, stop
	name string // the timer scheduled, cancelled through its handle or waited for
	key  uint64
	long bool // schedule: an hour rather than at once
	want bool // cancel-key, reset-key, lookup (found, and it is timer name), cancel
}

func (r *keyedRun) exec(st step) {
	t := r.t
	switch st.do {
	case "schedule-key", "schedule":
		d := time.Duration(0)
		if st.long {
			d = time.Hour
		}
		ran := new(atomic.Int32)
		task := func() { ran.Add(1) }
		var tm shardwheel.Timer
		var err error
		if st.do == "schedule" {
			tm, err = r.s.AfterFunc(d, task, shardwheel.ByKey(st.key))
		} else {
			tm, err = r.ix.AfterFunc(st.key, d, task, shardwheel.ByKey(st.key))
		}
		require.NoError(t, err)
		if st.long { // a timer due at once may have run already
			require.True(t, tm.Pending())
		}
		r.timers[st.name], r.ran[st.name] = tm, ran
	case "cancel-key":
		assert.Equal(t, st.want, r.ix.Cancel(st.key), "Index.Cancel(%d)", st.key)
	case "reset-key":
		assert.Equal(t, st.want, r.ix.Reset(st.key, time.Hour), "Index.Reset(%d)", st.key)
	case "lookup":
		tm, ok := r.ix.Lookup(st.key)
		assert.Equal(t, st.want, ok, "Lookup(%d) found", st.key)
		if st.want {
			assert.Equal(t, r.timers[st.name], tm, "Lookup(%d) returns %s", st.key, st.name)
			assert.True(t, tm.Pending())
		} else {
			assert.Equal(t, shardwheel.Timer{}, tm)
		}
	case "cancel":
		assert.Equal(t, st.want, r.timers[st.name].Cancel(), "%s.Cancel()", st.name)
	case "wait-ran":
		require.Eventually(t, func() bool { return r.ran[st.name].Load() == 1 }, waitFor, pollEvery, "%s runs", st.name)
	case "stop":
		r.s.Stop()
	default:
		t.Fatalf("unknown step %q", st.do)
	}
}

// TestKeyedSemantics runs the keyed API's contract as a table: each case a
// sequence of calls and the results they must give, then what must hold of
// every timer the case made (which ran, which are pending) and of the index
// (no entry outlives its timer).
func TestKeyedSemantics(t *testing.T) {
	cases := []struct {
		name    string
		steps   []step
		ran     []string // timers whose task ran, once; the others never ran
		pending []string // timers still pending at the end
	}{
		{"Index.Cancel stops the indexed timer, once", []step{
			{do: "schedule-key", name: "a", key: 1, long: true},
			{do: "lookup", key: 1, name: "a", want: true},
			{do: "cancel-key", key: 1, want: true},
			{do: "cancel-key", key: 1, want: false},
			{do: "lookup", key: 1},
			{do: "cancel", name: "a", want: false},
		}, nil, nil},
		{"keyed calls on a key never scheduled find nothing", []step{
			{do: "cancel-key", key: 7},
			{do: "reset-key", key: 7},
			{do: "lookup", key: 7},
		}, nil, nil},
		{"plain timers are not indexed, even on a key with an indexed timer", []step{
			{do: "schedule", name: "p", key: 1, long: true},
			{do: "lookup", key: 1},
			{do: "cancel-key", key: 1},
			{do: "reset-key", key: 1},
			{do: "schedule-key", name: "k", key: 1, long: true},
			{do: "schedule", name: "p2", key: 1, long: true},
			{do: "lookup", key: 1, name: "k", want: true},
			{do: "cancel-key", key: 1, want: true},
			{do: "cancel-key", key: 1},
		}, nil, []string{"p", "p2"}},
		{"Index.AfterFunc replaces the pending indexed timer", []step{
			{do: "schedule-key", name: "old", key: 1, long: true},
			{do: "schedule-key", name: "new", key: 1, long: true},
			{do: "cancel", name: "old", want: false},
			{do: "lookup", key: 1, name: "new", want: true},
			{do: "reset-key", key: 1, want: true},
		}, nil, []string{"new"}},
		{"replacing an indexed timer that ran replaces nothing", []step{
			{do: "schedule-key", name: "ran", key: 1},
			{do: "wait-ran", name: "ran"},
			{do: "lookup", key: 1},
			{do: "schedule-key", name: "next", key: 1, long: true},
			{do: "lookup", key: 1, name: "next", want: true},
		}, []string{"ran"}, []string{"next"}},
		{"a timer cancelled through its handle leaves the index", []step{
			{do: "schedule-key", name: "a", key: 1, long: true},
			{do: "cancel", name: "a", want: true},
			{do: "lookup", key: 1},
			{do: "cancel-key", key: 1},
			{do: "reset-key", key: 1},
		}, nil, nil},
		{"Index.Reset finds only a pending indexed timer", []step{
			{do: "schedule-key", name: "a", key: 1, long: true},
			{do: "reset-key", key: 1, want: true},
			{do: "lookup", key: 1, name: "a", want: true},
			{do: "cancel-key", key: 1, want: true},
			{do: "reset-key", key: 1},
		}, nil, nil},
		{"Index.Reset revives nothing that ran", []step{
			{do: "schedule-key", name: "a", key: 1},
			{do: "wait-ran", name: "a"},
			{do: "reset-key", key: 1},
			{do: "cancel-key", key: 1},
		}, []string{"a"}, nil},
		{"keys are independent", []step{
			{do: "schedule-key", name: "a", key: 1, long: true},
			{do: "schedule-key", name: "b", key: 2, long: true},
			{do: "cancel-key", key: 1, want: true},
			{do: "lookup", key: 2, name: "b", want: true},
		}, nil, []string{"b"}},
		{"Stop ends indexed timers and empties the index", []step{
			{do: "schedule-key", name: "a", key: 1, long: true},
			{do: "stop"},
			{do: "lookup", key: 1},
			{do: "cancel-key", key: 1},
			{do: "reset-key", key: 1},
		}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
			ix := shardwheel.NewIndex[uint64](s)
			r := &keyedRun{t: t, s: s, ix: ix, timers: map[string]shardwheel.Timer{}, ran: map[string]*atomic.Int32{}}
			for _, st := range c.steps {
				r.exec(st)
			}
			for name, tm := range r.timers {
				wantRan, wantPending := slices.Contains(c.ran, name), slices.Contains(c.pending, name)
				assert.Equal(t, wantPending, tm.Pending(), "%s pending", name)
				assert.Equal(t, wantRan, r.ran[name].Load() == 1, "%s ran", name)
				assert.LessOrEqual(t, r.ran[name].Load(), int32(1), "%s ran once at most", name)
			}
			indexed := 0
			for _, k := range []uint64{1, 2, 7} {
				if _, ok := ix.Lookup(k); ok {
					indexed++
				}
			}
			require.Eventually(t, func() bool { return indexLen(ix) == indexed }, waitFor, pollEvery,
				"the index keeps an entry only for pending indexed timers")
			assert.Equal(t, len(c.pending), s.Pending())
		})
	}
}

// keyedFate is one timer of the keyed hammer: how it may have ended.
type keyedFate struct {
	handle    shardwheel.Timer
	keyed     bool
	ran       atomic.Int32
	cancelled atomic.Int32 // by a Cancel through its handle
	stopped   atomic.Int32
}

// TestKeyedHammerExactlyOnce hammers four keys on two shards from eight
// goroutines with Index.AfterFunc (some timers due at once), plain Schedule on
// the same keys, Index.Cancel, Index.Reset, Index.Lookup and Cancel through handles,
// at several GOMAXPROCS. Half way it checks that each key has at most one
// pending indexed timer and that Index.Lookup finds exactly it; in the second
// half Stop races the calls. Then every timer must have ended exactly one
// way: a plain timer ran, was cancelled through its handle or was returned
// by Stop; an indexed one the same, or was cancelled by key or replaced,
// which the shards' Cancelled count accounts for exactly. Nothing stays
// pending and the index is empty.
func TestKeyedHammerExactlyOnce(t *testing.T) {
	ops := 4_000
	if testing.Short() || raceEnabled {
		ops = 1_500
	}
	forEachProcs(t, func(t *testing.T, _ int) {
		keyedHammer(t, 8, ops)
	})
}

func keyedHammer(t *testing.T, workers, ops int) {
	s := newUnstopped(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	ix := shardwheel.NewIndex[uint64](s)
	keys := append(keysFor(s, 0, 2), keysFor(s, 1, 2)...)
	var (
		mu        sync.Mutex // guards fates, byHandle and looked; never held across a scheduler call
		fates     []*keyedFate
		byHandle  = map[shardwheel.Timer]*keyedFate{}
		looked    []shardwheel.Timer // handles Index.Lookup returned
		stopped   []shardwheel.Timer
		stopOnce  sync.Once
		opsDone   atomic.Int64
		keyCancel atomic.Int64 // Index.Cancel calls that returned true
	)
	delays := []time.Duration{0, time.Millisecond, 3 * time.Millisecond, time.Hour}
	work := func(seed uint64, n int, stopAt int64) {
		rng := rand.New(rand.NewPCG(seed, 7))
		for range n {
			if opsDone.Add(1) == stopAt {
				stopOnce.Do(func() { stopped = s.Stop() })
			}
			k := keys[rng.IntN(len(keys))]
			switch op := rng.IntN(8); op {
			case 0, 1, 2: // schedule, indexed or (op 2) plain
				f := &keyedFate{keyed: op != 2}
				d := delays[rng.IntN(len(delays))]
				var err error
				if f.keyed {
					f.handle, err = ix.AfterFunc(k, d, func() { f.ran.Add(1) }, shardwheel.ByKey(k))
				} else {
					f.handle, err = s.AfterFunc(d, func() { f.ran.Add(1) }, shardwheel.ByKey(k))
				}
				if err != nil {
					assert.ErrorIs(t, err, shardwheel.ErrStopped)
					continue
				}
				mu.Lock()
				fates = append(fates, f)
				byHandle[f.handle] = f
				mu.Unlock()
			case 3:
				if ix.Cancel(k) {
					keyCancel.Add(1)
				}
			case 4:
				ix.Reset(k, delays[1+rng.IntN(len(delays)-1)])
			case 5:
				if h, ok := ix.Lookup(k); ok {
					assert.Equal(t, k, h.Key())
					mu.Lock()
					looked = append(looked, h)
					mu.Unlock()
				}
			default: // cancel a random timer through its handle
				mu.Lock()
				var f *keyedFate
				if len(fates) > 0 {
					f = fates[rng.IntN(len(fates))]
				}
				mu.Unlock()
				if f != nil && f.handle.Cancel() {
					f.cancelled.Add(1)
				}
			}
		}
	}
	phase := func(stopAt int64) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() { work(rand.Uint64()+uint64(w), ops/2, stopAt) })
		}
		wg.Wait()
	}

	phase(-1)
	// Quiescent: at most one pending indexed timer per key, and Index.Lookup
	// finds it (once the short timers have settled).
	var crowded []int // a key's count of pending indexed timers, when above 1
	require.Eventually(t, func() bool {
		for _, k := range keys {
			var live []shardwheel.Timer
			for _, f := range fates {
				if f.keyed && f.handle.Key() == k && f.handle.Pending() {
					live = append(live, f.handle)
				}
			}
			if len(live) > 1 {
				crowded = append(crowded, len(live))
				return true
			}
			got, ok := ix.Lookup(k)
			if ok != (len(live) == 1) || ok && got != live[0] {
				return false
			}
		}
		return true
	}, waitFor, pollEvery, "Index.Lookup finds each key's one pending indexed timer")
	require.Empty(t, crowded, "keys with more than one pending indexed timer")

	phase(opsDone.Load() + int64(workers*ops/4)) // Stop half way through
	stopOnce.Do(func() { stopped = s.Stop() })

	for _, h := range stopped {
		f := byHandle[h]
		require.NotNil(t, f, "Stop returned a handle no call returned")
		f.stopped.Add(1)
	}
	for _, h := range looked {
		f := byHandle[h]
		require.NotNil(t, f, "Index.Lookup returned a handle no call returned")
		require.True(t, f.keyed, "Index.Lookup returned a plain timer")
	}
	unaccounted := int64(0) // indexed timers cancelled by key or replaced
	ran := int64(0)
	handleCancels := int64(0)
	for _, f := range fates {
		ends := f.ran.Load() + f.cancelled.Load() + f.stopped.Load()
		ran += int64(f.ran.Load())
		handleCancels += int64(f.cancelled.Load())
		if f.keyed {
			require.LessOrEqual(t, ends, int32(1), "indexed timer %v ended %d ways", f.handle, ends)
			unaccounted += int64(1 - ends)
		} else {
			require.Equal(t, int32(1), ends, "plain timer %v ended %d ways (a keyed call touched it?)", f.handle, ends)
		}
	}
	st := s.Stats()
	assert.Equal(t, int64(st.Total.Cancelled), handleCancels+unaccounted,
		"every indexed timer not accounted for was cancelled by key or replaced")
	assert.LessOrEqual(t, keyCancel.Load(), unaccounted)
	assert.Equal(t, uint64(len(fates)), st.Total.Scheduled)
	assert.Equal(t, int64(len(fates)), ran+int64(st.Total.Cancelled)+int64(len(stopped)))
	assert.Zero(t, s.Pending())
	assert.Zero(t, indexLen(ix), "Stop empties the index, also of Index.AfterFunc calls racing it")
}

// TestIndexResetNeverEarly pushes the deadlines of many indexed timers
// forward by key, as a connection's reads would, and checks that each
// task runs no earlier than its last successful Index.Reset plus the delay:
// never at an old deadline.
func TestIndexResetNeverEarly(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	ix := shardwheel.NewIndex[uint64](s)
	const n, delay = 64, 20 * time.Millisecond
	var lastReset [n]atomic.Int64 // ns since epoch, before the Index.Reset that returned true
	var ranAt [n]atomic.Int64
	epoch := time.Now()
	for k := range n {
		lastReset[k].Store(int64(time.Since(epoch)))
		_, err := ix.AfterFunc(uint64(k), delay, func() { ranAt[k].Store(int64(time.Since(epoch))) })
		require.NoError(t, err)
	}
	for range 8 { // eight rounds of reads, 5ms apart: each moves every deadline
		time.Sleep(5 * time.Millisecond)
		for k := range n {
			before := int64(time.Since(epoch))
			if ix.Reset(uint64(k), delay) {
				lastReset[k].Store(before)
			}
		}
	}
	require.Eventually(t, func() bool { return s.Pending() == 0 }, waitFor, pollEvery)
	assert.False(t, ix.Reset(0, delay), "a timer that ran is not reset")
	waitTasksReturned(t, s)
	for k := range n {
		ran, reset := time.Duration(ranAt[k].Load()), time.Duration(lastReset[k].Load())
		assert.GreaterOrEqual(t, ran, reset+delay, "key %d ran %v after its last reset, before the delay", k, ran-reset)
	}
}

// TestStopReturnsIndexedTimers stops a scheduler holding indexed and plain
// timers: Stop returns both kinds, each once, and leaves the index empty,
// so that keyed calls find nothing and Index.AfterFunc fails.
func TestStopReturnsIndexedTimers(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(3))
	ix := shardwheel.NewIndex[uint64](s)
	want := map[shardwheel.Timer]bool{}
	for k := range uint64(100) {
		tm, err := ix.AfterFunc(k, time.Hour, noop)
		require.NoError(t, err)
		want[tm] = true
		tm, err = s.AfterFunc(time.Hour, noop, shardwheel.ByKey(k))
		require.NoError(t, err)
		want[tm] = true
	}
	got := s.Stop()
	require.Len(t, got, len(want))
	for _, tm := range got {
		require.True(t, want[tm], "returned once, and only timers that were scheduled")
		delete(want, tm)
		assert.False(t, tm.Pending())
	}
	assert.Zero(t, indexLen(ix))
	assert.False(t, ix.Cancel(1))
	assert.False(t, ix.Reset(1, time.Second))
	_, ok := ix.Lookup(1)
	assert.False(t, ok)
	_, err := ix.AfterFunc(1, time.Hour, noop)
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
	assert.Zero(t, s.Pending())
}

// TestIndexEntryGoesWhenTheTimerEnds checks that no way of ending leaves an
// entry behind: the timer ran, was cancelled through its handle or by key,
// was replaced (the entry then names the new timer), or was returned by
// Stop. Entries of timers that ran or were cancelled through their handle
// go at the worker's next pass: the test polls for them.
func TestIndexEntryGoesWhenTheTimerEnds(t *testing.T) {
	cases := []struct {
		name string
		end  func(s *shardwheel.Scheduler, ix *shardwheel.Index[uint64], tm shardwheel.Timer) (left int)
	}{
		{"ran", func(s *shardwheel.Scheduler, ix *shardwheel.Index[uint64], _ shardwheel.Timer) int {
			require.True(t, ix.Reset(1, 0))
			return 0
		}},
		{"cancelled through the handle", func(_ *shardwheel.Scheduler, ix *shardwheel.Index[uint64], tm shardwheel.Timer) int {
			require.True(t, tm.Cancel())
			return 0
		}},
		{"cancelled by key", func(s *shardwheel.Scheduler, ix *shardwheel.Index[uint64], _ shardwheel.Timer) int {
			require.True(t, ix.Cancel(1))
			return 0
		}},
		{"replaced", func(s *shardwheel.Scheduler, ix *shardwheel.Index[uint64], tm shardwheel.Timer) int {
			next, err := ix.AfterFunc(1, time.Hour, noop)
			require.NoError(t, err)
			require.False(t, tm.Pending())
			got, ok := ix.Lookup(1)
			require.True(t, ok)
			require.Equal(t, next, got)
			return 1 // the new timer's entry
		}},
		{"returned by Stop", func(s *shardwheel.Scheduler, ix *shardwheel.Index[uint64], _ shardwheel.Timer) int {
			require.Len(t, s.Stop(), 1)
			return 0
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
			ix := shardwheel.NewIndex[uint64](s)
			tm, err := ix.AfterFunc(1, time.Hour, noop)
			require.NoError(t, err)
			require.Equal(t, 1, indexLen(ix))
			left := c.end(s, ix, tm)
			require.Eventually(t, func() bool { return indexLen(ix) == left }, waitFor, pollEvery,
				"index entries left: %d, want %d", indexLen(ix), left)
			assert.Equal(t, left, s.Pending())
		})
	}
}

// TestKeyedCallsNeverSeePlainTimersNorEndedOnes: keyed calls never see a
// plain timer on the same key; Index.AfterFunc replaces the key's timer, which
// never runs, reports not pending and counts as cancelled; once an indexed
// timer has ended (cancelled through its handle, or ran) keyed calls no
// longer find it and its entry goes.
func TestKeyedCallsNeverSeePlainTimersNorEndedOnes(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	ix := shardwheel.NewIndex[uint64](s)
	const k = 42
	plainRan := atomic.Int32{}
	plain, err := s.AfterFunc(time.Hour, func() { plainRan.Add(1) }, shardwheel.ByKey(k))
	require.NoError(t, err)
	_, ok := ix.Lookup(k)
	assert.False(t, ok)
	assert.False(t, ix.Cancel(k))
	assert.False(t, ix.Reset(k, 0))
	assert.True(t, plain.Pending())

	oldRan := atomic.Int32{}
	old, err := ix.AfterFunc(k, time.Hour, func() { oldRan.Add(1) })
	require.NoError(t, err)
	c0 := s.Stats().Total.Cancelled
	nw, err := ix.AfterFunc(k, time.Hour, noop)
	require.NoError(t, err)
	assert.False(t, old.Pending())
	assert.False(t, old.Cancel(), "replaced timer cancellable again")
	assert.Equal(t, c0+1, s.Stats().Total.Cancelled)
	got, ok := ix.Lookup(k)
	require.True(t, ok)
	assert.Equal(t, nw, got)

	// cancelled through its handle: keyed calls no longer find it
	require.True(t, nw.Cancel())
	_, ok = ix.Lookup(k)
	assert.False(t, ok)
	assert.False(t, ix.Reset(k, time.Hour))
	assert.False(t, ix.Cancel(k))
	assert.True(t, plain.Pending(), "keyed calls touched the plain timer")
	require.Eventually(t, func() bool { return indexLen(ix) == 0 }, waitFor, pollEvery)

	// ran: keyed calls no longer find it; its entry goes at the next pass
	ran := make(chan struct{})
	_, err = ix.AfterFunc(k, 0, func() { close(ran) })
	require.NoError(t, err)
	<-ran
	_, ok = ix.Lookup(k)
	assert.False(t, ok)
	assert.False(t, ix.Reset(k, time.Hour))
	assert.False(t, ix.Cancel(k))
	require.Eventually(t, func() bool { return indexLen(ix) == 0 }, waitFor, pollEvery)

	assert.True(t, plain.Pending())
	assert.Zero(t, plainRan.Load())
	assert.Zero(t, oldRan.Load())
	assert.True(t, plain.Cancel())
}

// TestIndexResetRunsDelayFromTheCall: Index.Reset moves an hour-away timer to
// 30ms from the call, where it runs (never earlier), and is false once the
// timer has run.
func TestIndexResetRunsDelayFromTheCall(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	ix := shardwheel.NewIndex[uint64](s)
	const k = 7
	var at atomic.Int64
	start := time.Now()
	_, err := ix.AfterFunc(k, time.Hour, func() { at.Store(int64(time.Since(start))) })
	require.NoError(t, err)
	before := time.Since(start)
	require.True(t, ix.Reset(k, 30*time.Millisecond))
	require.Eventually(t, func() bool { return at.Load() != 0 }, waitFor, pollEvery)
	assert.GreaterOrEqual(t, time.Duration(at.Load()), before+30*time.Millisecond)
	assert.False(t, ix.Reset(k, time.Hour), "Index.Reset found a timer that ran")
}

// TestConcurrentIndexAfterFuncsLeaveOne: Index.AfterFunc calls on one key from eight
// goroutines leave exactly one timer pending, the one Index.Lookup finds, and
// count every other as cancelled.
func TestConcurrentIndexAfterFuncsLeaveOne(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	ix := shardwheel.NewIndex[uint64](s)
	const k, g, per = 99, 8, 200
	var mu sync.Mutex
	var all []shardwheel.Timer
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				tm, err := ix.AfterFunc(k, time.Hour, noop)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, tm)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	pending := 0
	var last shardwheel.Timer
	for _, tm := range all {
		if tm.Pending() {
			pending++
			last = tm
		}
	}
	require.Equal(t, 1, pending)
	assert.Equal(t, 1, s.Pending())
	got, ok := ix.Lookup(k)
	require.True(t, ok)
	assert.Equal(t, last, got)
	st := s.Stats().Total
	assert.EqualValues(t, g*per-1, st.Cancelled)
	require.True(t, ix.Cancel(k))
	assert.Equal(t, 0, s.Pending())
}

// TestIndexEntryGoesAtOnceByKeyReplaceAndStop: an index entry goes at once
// when its timer is replaced, cancelled by key or returned by Stop, and
// keyed calls after Stop find nothing.
func TestIndexEntryGoesAtOnceByKeyReplaceAndStop(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	ix := shardwheel.NewIndex[uint64](s)
	for k := uint64(0); k < 50; k++ {
		_, err := ix.AfterFunc(k, time.Hour, noop)
		require.NoError(t, err)
		_, err = ix.AfterFunc(k, time.Hour, noop)
		require.NoError(t, err)
	}
	assert.Equal(t, 50, indexLen(ix), "a replaced entry stayed")
	for k := uint64(0); k < 25; k++ {
		require.True(t, ix.Cancel(k))
		require.False(t, ix.Cancel(k))
	}
	assert.Equal(t, 25, indexLen(ix), "Index.Cancel left its entry")
	assert.Equal(t, 25, s.Pending())
	out := s.Stop()
	assert.Len(t, out, 25)
	assert.Zero(t, indexLen(ix))
	_, err := ix.AfterFunc(1, time.Hour, noop)
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
	assert.False(t, ix.Reset(30, 0))
	assert.False(t, ix.Cancel(30))
}
