package shardwheel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// The mixed load: every way in at once, the oracle checking each timer's
// end. Each worker owns the timers it schedules (nobody else cancels or
// resets them) and 16 index keys, so that it knows, for each call it
// makes, what the answer must be:
//
//   - a task never runs before the bound of the last AfterFunc, Reset or
//     Index.Reset that returned true for its timer (the call's start plus
//     its delay, whatever its Slack), nor twice;
//   - a series' k-th run starts no earlier than k periods after Every,
//     never while its previous run runs, and none starts after a
//     CancelWait that returned true has returned (mixed_series_test.go);
//   - a Cancel or Reset on a timer whose task had already run (the task
//     recorded it before the call began) returns false: a stale handle
//     touches nothing;
//   - a context's deadline never passes early, and a context made with a
//     huge timeout is not born expired;
//   - once Stop has returned, every accepted timer has ended exactly one
//     way: it ran, a Cancel (or Index.Cancel, or its replacement by
//     Index.AfterFunc) ended it, or Stop returned it; a series, by a Cancel
//     or Stop.
//
// Its length comes from SHARDWHEEL_MIXED (a Go duration; 2s by default,
// 500ms with -short), so that CI and a long hunt run the same test.

// mixedTimer is one timer of the mixed load, and what the oracle knows of
// it.
type mixedTimer struct {
	id     int
	kind   string // how it was scheduled, for the failure message
	handle shardwheel.Timer
	key    uint64 // its index key, or 0
	// bound is the earliest time (ns since the load's epoch) the task
	// may run: set before the timer can run (the task waits for ready),
	// moved by the owner after each successful Reset. low is never above
	// it: a Reset's task may run before the owner has stored the new
	// bound, so the owner lowers low before the call. A task checks low
	// when it runs, the end of the load checks bound.
	bound  atomic.Int64
	low    atomic.Int64
	ready  atomic.Bool
	ranAt  atomic.Int64 // when the task ran, 0 if not (yet)
	resets atomic.Int32 // Resets and Index.Reset calls that returned true
	runs   atomic.Int32
	ended  atomic.Int32 // Cancel or Index.Cancel returned true
	// replaced: a later Index.AfterFunc on its key found it pending or saw
	// it run; it then ended by running or by the replacement.
	replaced bool
	stopped  bool
}

// mixedOracle collects violations; the test fails with the first few.
type mixedOracle struct {
	t     testing.TB
	epoch time.Time
	mu    sync.Mutex
	bad   []string
	count atomic.Int64
	// spikes counts the spikes' timers and how they ended: each runs or
	// is cancelled, once.
	spikes struct{ scheduled, ran, cancelled atomic.Int64 }
	// series holds every series (Timer -> *mixedSeries), seriesByKey
	// the Handler ones by their argument.
	series, seriesByKey sync.Map
}

func (o *mixedOracle) now() int64 { return int64(time.Since(o.epoch)) }

func (o *mixedOracle) fail(format string, args ...any) {
	o.count.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.bad) < 10 {
		o.bad = append(o.bad, fmt.Sprintf(format, args...))
	}
}

// run is the task of timer m: it checks the bound and counts the run.
func (o *mixedOracle) run(m *mixedTimer) {
	now := o.now()
	for !m.ready.Load() {
		// Its AfterFunc has not returned yet (a delay of 0 may run
		// first): the bound was the call's start, stored before it.
		runtime.Gosched()
	}
	if b := m.low.Load(); now < b {
		o.fail("timer %d (%s, reset %d times) ran %v before its bound", m.id, m.kind, m.resets.Load(), time.Duration(b-now))
	}
	if m.runs.Add(1) > 1 {
		o.fail("timer %d ran twice", m.id)
	}
	m.ranAt.Store(now)
}

// reset calls call, a Reset of m to delay d, moving m's bounds as its
// answer says, and returns the answer. The owner only.
func (m *mixedTimer) reset(o *mixedOracle, call func() bool, d time.Duration) bool {
	bound := o.now() + int64(d)
	m.low.Store(min(m.bound.Load(), bound))
	if !call() {
		m.low.Store(m.bound.Load())
		return false
	}
	m.bound.Store(bound)
	m.low.Store(bound)
	m.resets.Add(1)
	return true
}

// mixedDuration returns how long the mixed load runs.
func mixedDuration(t testing.TB) time.Duration {
	if v := os.Getenv("SHARDWHEEL_MIXED"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "SHARDWHEEL_MIXED")
		return d
	}
	if testing.Short() {
		return 500 * time.Millisecond
	}
	return 2 * time.Second
}

// TestMixedLoadOracle runs the mixed load (see the top of this file) with
// GOMAXPROCS cycling through 2, 4, 1, 3, 8, 2 every 5ms, and checks every
// timer's end: on 3 shards with the default options, and with small
// blocks and a small transfer cap, which keep queues backlogged and
// storage growing.
func TestMixedLoadOracle(t *testing.T) {
	for name, opts := range map[string][]shardwheel.Option{
		"defaults": nil,
		"small":    {shardwheel.WithInitialCapacity(64), shardwheel.WithTransferCap(64)},
	} {
		t.Run(name, func(t *testing.T) {
			runMixedLoad(t, mixedDuration(t), 4, append([]shardwheel.Option{shardwheel.WithShards(3)}, opts...)...)
		})
	}
}

// runMixedLoad runs the mixed load for d on a Scheduler made with opts,
// from workers goroutines, half of them locked to their OS threads.
func runMixedLoad(t testing.TB, d time.Duration, workers int, opts ...shardwheel.Option) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	o := &mixedOracle{t: t, epoch: time.Now()}
	var byID sync.Map // handler key -> *mixedTimer
	h, err := s.NewHandler(func(key uint64) {
		if m, ok := byID.Load(key); ok {
			o.run(m.(*mixedTimer))
		}
	})
	require.NoError(t, err)
	hs, err := s.NewHandler(func(key uint64) {
		if m, ok := o.seriesByKey.Load(key); ok {
			o.runSeries(m.(*mixedSeries))
		}
	})
	require.NoError(t, err)

	stop := make(chan struct{})
	var procsDone sync.WaitGroup
	procsDone.Add(1)
	go func() { // GOMAXPROCS cycles
		defer procsDone.Done()
		cycle := []int{2, 4, 1, 3, 8, 2}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				runtime.GOMAXPROCS(cycle[i%len(cycle)])
			}
		}
	}()

	var nextID atomic.Int64
	var all sync.Map // Timer -> *mixedTimer
	ix, fresh := shardwheel.NewIndex[uint64](s), shardwheel.NewIndex[string](s)
	var ctxs sync.WaitGroup
	var wg sync.WaitGroup
	var liveSeries atomic.Int64 // left for Stop to return
	deadline := time.Now().Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w%2 == 0 {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			mw := &mixedWorker{o: o, s: s, h: h, hs: hs, ix: ix, fresh: fresh, byID: &byID, all: &all, nextID: &nextID,
				rng: rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano()))), ctxs: &ctxs}
			for i := range mw.keys {
				mw.keys[i] = uint64(w+1)<<40 | uint64(i+1)
			}
			spikeAt := time.Now().Add(time.Duration(w+1) * 300 * time.Millisecond)
			for time.Now().Before(deadline) && o.count.Load() == 0 {
				mw.step()
				if time.Now().After(spikeAt) {
					mw.spike()
					spikeAt = time.Now().Add(time.Second + time.Duration(mw.rng.IntN(1000))*time.Millisecond)
				}
			}
			// End half the series left; Stop returns the others.
			for _, m := range mw.live {
				if mw.rng.IntN(2) == 0 {
					mw.endSeries(m, mw.rng.IntN(2) == 0)
				} else {
					liveSeries.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	procsDone.Wait()
	// No shard sleeps while work for it waits: with the hour-long timers
	// cancelled, every other timer runs, on every shard, with nobody
	// calling in to wake it.
	far := o.now() + int64(time.Minute)
	all.Range(func(_, v any) bool {
		if m := v.(*mixedTimer); m.low.Load() > far && m.handle.Cancel() {
			m.ended.Add(1)
		}
		return true
	})
	if !assert.Eventually(t, func() bool { return s.Pending() == int(liveSeries.Load()) }, waitFor, pollEvery) {
		o.fail("%d timers never ran, none of them due later than 15ms after the load: a shard sleeps with work waiting", s.Pending()-int(liveSeries.Load()))
	}
	ctxs.Wait()
	// Quiescent: the Indexes hold the live indexed series and nothing
	// else (every one-shot timer has run or been cancelled, and its shard
	// has freed it or soon will).
	liveIndexed := func() (n int) {
		o.series.Range(func(_, v any) bool {
			if m := v.(*mixedSeries); m.indexed && m.ended.Load() == 0 {
				n++
			}
			return true
		})
		return n
	}
	if !assert.Eventually(t, func() bool { return indexLen(fresh) == 0 && indexLen(ix) == liveIndexed() }, waitFor, pollEvery) {
		o.fail("the Indexes hold %d and %d entries (-1: their maps disagree) for %d live indexed series", indexLen(ix),
			indexLen(fresh), liveIndexed())
	}
	st := s.Stats().Total
	t.Logf("blocks released %d, remade %d; swept %d; crossed %d", st.BlocksReleased, st.BlocksRemade, st.Swept, st.Crossed)
	stopAt := o.now()
	for _, tm := range s.Stop() {
		if v, ok := o.series.Load(tm); ok {
			v.(*mixedSeries).stopped = true
			continue
		}
		v, ok := all.Load(tm)
		if !ok {
			continue // a task's own timer, or a context's
		}
		v.(*mixedTimer).stopped = true
	}
	if n, m := indexLen(ix), indexLen(fresh); n != 0 || m != 0 {
		o.fail("Stop left index entries: %d and %d (-1: the maps disagree or leak)", n, m)
	}
	o.checkSeries(stopAt)
	t.Logf("series %d, their runs %d, returned by Stop %d", o.seriesCount(), o.seriesRuns(), liveSeries.Load())
	// Every accepted timer ended exactly one way.
	all.Range(func(_, v any) bool {
		m := v.(*mixedTimer)
		ways := int(m.runs.Load()) + int(m.ended.Load())
		if m.stopped {
			ways++
		}
		if m.replaced && ways == 0 {
			return true // its replacement ended it
		}
		if m.runs.Load() > 0 && m.ranAt.Load() < m.bound.Load() {
			o.fail("timer %d (%s, reset %d times) ran %v before the bound of its last Reset", m.id, m.kind, m.resets.Load(), time.Duration(m.bound.Load()-m.ranAt.Load()))
		}
		if ways != 1 {
			o.fail("timer %d ended %d ways (ran %d, cancelled %d, stopped %v)", m.id, ways, m.runs.Load(), m.ended.Load(), m.stopped)
		}
		return true
	})
	require.Zero(t, s.Pending(), "Pending after Stop")
	sp := &o.spikes
	require.Equal(t, sp.scheduled.Load(), sp.ran.Load()+sp.cancelled.Load(), "each spike timer ran or was cancelled, once")
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Empty(t, o.bad, "violations: %d", o.count.Load())
}

// mixedWorker is one goroutine of the mixed load, with what it owns.
type mixedWorker struct {
	o      *mixedOracle
	s      *shardwheel.Scheduler
	h, hs  shardwheel.Handler        // the one-shot timers' handler, the series'
	ix     *shardwheel.Index[uint64] // the keys' timers, shared by the workers
	fresh  *shardwheel.Index[string] // timers on fresh keys, never used again
	byID   *sync.Map
	all    *sync.Map // Timer -> *mixedTimer
	nextID *atomic.Int64
	rng    *rand.Rand
	ctxs   *sync.WaitGroup
	recent [256]*mixedTimer
	n      int
	keys   [16]uint64
	// byKey is the last timer ix.AfterFunc made for each key: the one
	// ix.Cancel and ix.Reset act on, while it has not run.
	byKey [16]*mixedTimer
	live  []*mixedSeries // the series it started and has not ended
	ended []*mixedSeries // the last series it ended: their handles are stale
}

// delay draws a delay: -1ms, 0, 0-12ms or an hour.
func (mw *mixedWorker) delay() time.Duration {
	switch mw.rng.IntN(8) {
	case 0:
		return -time.Millisecond
	case 1:
		return 0
	case 2:
		return time.Hour
	}
	return time.Duration(mw.rng.IntN(12_000)) * time.Microsecond
}

// newTimer makes the oracle's record of a timer about to be scheduled
// with delay; its id doubles as the handler key.
func (mw *mixedWorker) newTimer(delay time.Duration) *mixedTimer {
	m := &mixedTimer{id: int(mw.nextID.Add(1))}
	m.bound.Store(mw.o.now() + int64(max(delay, 0)))
	m.low.Store(m.bound.Load())
	return m
}

// accepted records a timer whose AfterFunc returned handle.
func (mw *mixedWorker) accepted(m *mixedTimer, handle shardwheel.Timer) {
	m.handle = handle
	m.ready.Store(true)
	mw.all.Store(handle, m)
	mw.recent[mw.n%len(mw.recent)] = m
	mw.n++
}

// schedule schedules one timer of a random kind; the task may itself
// schedule and cancel a timer of its own (nested).
func (mw *mixedWorker) schedule(nested bool) {
	d := mw.delay()
	m := mw.newTimer(d)
	key := uint64(m.id) | mw.rng.Uint64N(4)<<40 // the low bits name the timer
	var t shardwheel.Timer
	var err error
	task := func() { mw.o.run(m) }
	if nested {
		nestedKey := uint64(m.id) | 3<<60 // a key of its own
		task = func() {
			mw.o.run(m)
			var nt shardwheel.Timer
			var err error
			switch nestedKey % 3 {
			case 0:
				nt, err = mw.s.AfterFunc(time.Hour, noop)
			case 1:
				nt, err = mw.s.AfterFunc(time.Hour, noop, shardwheel.ByKey(nestedKey))
			default:
				if _, err = mw.ix.AfterFunc(nestedKey, time.Hour, noop); err == nil && !mw.ix.Cancel(nestedKey) {
					mw.o.fail("a task's own indexed timer could not be cancelled by key")
				}
				return
			}
			if err == nil && !nt.Cancel() {
				mw.o.fail("a task's own timer could not be cancelled")
			}
		}
	}
	// A third of them may run up to 10ms late: the bound stays the
	// delay's.
	var slack shardwheel.TimerOption
	if mw.rng.IntN(3) == 0 {
		slack = shardwheel.Slack(time.Duration(mw.rng.IntN(10_000)) * time.Microsecond)
	}
	switch mw.rng.IntN(4) {
	case 0:
		m.kind = "Handler.AfterFunc, ByKey"
		mw.byID.Store(key, m)
		t, err = mw.h.AfterFunc(key, d, shardwheel.ByKey(key), slack)
	case 1:
		m.kind = "AfterFunc, ByKey"
		t, err = mw.s.AfterFunc(d, task, shardwheel.ByKey(key), slack)
	case 2:
		m.kind = "Handler.AfterFunc"
		mw.byID.Store(key, m)
		t, err = mw.h.AfterFunc(key, d, slack)
	default:
		m.kind = "AfterFunc"
		t, err = mw.s.AfterFunc(d, task, slack)
	}
	if slack != (shardwheel.TimerOption{}) {
		m.kind += ", Slack"
	}
	if nested {
		m.kind += ", nested"
	}
	if err != nil {
		mw.o.fail("schedule: %v", err)
		return
	}
	mw.accepted(m, t)
}

// step makes one random call.
func (mw *mixedWorker) step() {
	o := mw.o
	switch mw.rng.IntN(13) {
	case 12:
		mw.series()
	case 0, 1:
		mw.schedule(false)
	case 2:
		mw.schedule(true)
	case 3: // the take-back path: an hour, cancelled at once
		m := mw.newTimer(time.Hour)
		m.kind = "AfterFunc, cancelled at once"
		var t shardwheel.Timer
		var err error
		if mw.rng.IntN(2) == 0 {
			m.kind = "AfterFunc, ByKey, cancelled at once"
			t, err = mw.s.AfterFunc(time.Hour, func() { o.run(m) }, shardwheel.ByKey(mw.rng.Uint64N(64)))
		} else {
			t, err = mw.s.AfterFunc(time.Hour, func() { o.run(m) })
		}
		if err != nil {
			o.fail("AfterFunc: %v", err)
			return
		}
		mw.accepted(m, t)
		if mw.rng.IntN(2) == 0 {
			runtime.Gosched()
		}
		mw.cancel(m)
	case 4, 5:
		if m := mw.recent[mw.rng.IntN(len(mw.recent))]; m != nil {
			mw.cancel(m)
		}
	case 6, 7:
		if m := mw.recent[mw.rng.IntN(len(mw.recent))]; m != nil {
			d := time.Duration(mw.rng.IntN(15_000)) * time.Microsecond
			ran := m.runs.Load() > 0
			if m.reset(o, func() bool { return m.handle.Reset(d) }, d) && ran {
				o.fail("Reset returned true for timer %d (%s), whose task had run", m.id, m.kind)
			}
		}
	case 8:
		mw.keyed()
	case 9:
		mw.context()
	case 10:
		i := mw.rng.IntN(len(mw.keys))
		if m := mw.byKey[i]; m != nil {
			ran := m.runs.Load() > 0 || m.ended.Load() > 0
			d := time.Duration(mw.rng.IntN(15_000)) * time.Microsecond
			if m.reset(o, func() bool { return mw.ix.Reset(mw.keys[i], d) }, d) && ran {
				o.fail("Index.Reset returned true for key %d, whose timer %d had ended", i, m.id)
			}
		}
	default:
		i := mw.rng.IntN(len(mw.keys))
		if m := mw.byKey[i]; m != nil {
			ran := m.runs.Load() > 0 || m.ended.Load() > 0
			if tm, ok := mw.ix.Lookup(mw.keys[i]); ok && ran {
				o.fail("Index.Lookup found key %d's timer %d pending after it ended (%v)", i, m.id, tm.Pending())
			}
			if mw.ix.Cancel(mw.keys[i]) {
				if ran {
					o.fail("Index.Cancel returned true for key %d, whose timer %d had ended", i, m.id)
				}
				m.ended.Add(1)
			}
		}
	}
}

// spike schedules tens of thousands of timers and cancels them: hour-long
// ones, all then cancelled, or keyed ones due in half a second, which
// cross to their keys' shards at once, cancelled a thousand at a time
// (before the first comes due). The shards' storage grows, the nodes are
// freed, and the reviews give blocks back, to make them again at the next
// burst (a crossing takes its node from the other shard's storage).
func (mw *mixedWorker) spike() {
	n := 20_000 + mw.rng.IntN(40_000)
	routed := mw.rng.IntN(2) == 0
	ts := make([]shardwheel.Timer, 0, n)
	cancel := func() {
		for _, t := range ts {
			if t.Cancel() {
				mw.o.spikes.cancelled.Add(1)
			}
		}
		ts = ts[:0]
	}
	defer cancel()
	for range n {
		if routed && len(ts) == 1000 {
			cancel()
		}
		var t shardwheel.Timer
		var err error
		d := time.Hour
		if routed {
			d = 500 * time.Millisecond
		}
		bound := mw.o.now() + int64(d)
		task := func() {
			// A slow host may let one run before the worker cancels it.
			if now := mw.o.now(); now < bound {
				mw.o.fail("a spike's timer ran %v early", time.Duration(bound-now))
			}
			mw.o.spikes.ran.Add(1)
		}
		if routed {
			t, err = mw.s.AfterFunc(d, task, shardwheel.ByKey(mw.rng.Uint64()))
		} else {
			t, err = mw.s.AfterFunc(d, task)
		}
		if err != nil {
			mw.o.fail("spike: %v", err)
			return
		}
		mw.o.spikes.scheduled.Add(1)
		ts = append(ts, t)
	}
}

// cancel cancels m through its handle.
func (mw *mixedWorker) cancel(m *mixedTimer) {
	ran := m.runs.Load() > 0
	if m.handle.Cancel() {
		if ran {
			mw.o.fail("Cancel returned true for timer %d, whose task had run", m.id)
		}
		m.ended.Add(1)
	}
}

// keyed schedules a timer on one of the worker's index keys (replacing
// its pending one), with the key's own routing or ByKey's, exact or with
// slack, or on a fresh string key of another Index.
func (mw *mixedWorker) keyed() {
	d := mw.delay()
	m := mw.newTimer(d)
	task := func() { mw.o.run(m) }
	var opts []shardwheel.TimerOption
	m.kind = "Index.AfterFunc"
	switch mw.rng.IntN(4) {
	case 0:
		m.kind = "Index.AfterFunc, ByKey"
		opts = append(opts, shardwheel.ByKey(uint64(mw.rng.IntN(8))))
	case 1:
		m.kind = "Index.AfterFunc, Slack" // never early: the bound stays the delay's
		opts = append(opts, shardwheel.Slack(time.Duration(mw.rng.IntN(10_000))*time.Microsecond))
	}
	if mw.rng.IntN(4) == 0 { // a fresh key, never used again
		m.kind += ", fresh string key"
		t, err := mw.fresh.AfterFunc(fmt.Sprintf("fresh %d", m.id), d, task, opts...)
		if err != nil {
			mw.o.fail("Index.AfterFunc: %v", err)
			return
		}
		mw.accepted(m, t)
		return
	}
	i := mw.rng.IntN(len(mw.keys))
	m.key = mw.keys[i]
	prev := mw.byKey[i]
	t, err := mw.ix.AfterFunc(m.key, d, task, opts...)
	if err != nil {
		mw.o.fail("Index.AfterFunc: %v", err)
		return
	}
	if prev != nil {
		prev.replaced = true
		if prev.handle.Pending() {
			mw.o.fail("key %d's timer %d still pending after its replacement", i, prev.id)
		}
	}
	mw.byKey[i] = m
	mw.accepted(m, t)
}

// context makes a context with a random timeout (sometimes a huge one),
// cancels half of them at once, and checks that none is done early.
func (mw *mixedWorker) context() {
	o := mw.o
	var timeout time.Duration
	switch mw.rng.IntN(6) {
	case 0:
		timeout = time.Duration(1<<63 - 1)
	case 1:
		timeout = time.Hour
	default:
		timeout = time.Duration(mw.rng.IntN(12_000)) * time.Microsecond
	}
	start := time.Now()
	ctx, cancel := mw.s.WithTimeout(context.Background(), timeout)
	if dl, ok := ctx.Deadline(); !ok || dl.Before(start.Add(min(timeout, 1<<40))) && timeout > 0 {
		o.fail("WithTimeout(%v): deadline %v, before the call plus the timeout", timeout, dl)
	}
	mw.ctxs.Add(1)
	stop := context.AfterFunc(ctx, func() {
		defer mw.ctxs.Done()
		if ctx.Err() == context.DeadlineExceeded && time.Since(start) < timeout {
			o.fail("a context of timeout %v expired after %v", timeout, time.Since(start))
		}
	})
	if mw.rng.IntN(2) == 0 || timeout >= time.Hour {
		cancel()
	}
	_ = stop
}
