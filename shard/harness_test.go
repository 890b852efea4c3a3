package shard

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/stress"
)

const testTick = time.Millisecond

// harness drives a shard without its goroutine: the test plays the shard goroutine,
// calling pass after moving the manual clock, so every outcome is exact.
type harness struct {
	t  testing.TB
	sh *Shard
	// from is the elapsed tick the current pass started from: its tasks
	// run after it has moved elapsed on, to the pass's target.
	from   uint64
	clock  *ManualClock
	fired  map[int]time.Duration // timer id -> clock reading when it ran
	panics []any
}

func newHarness(t testing.TB, mutate ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: &ManualClock{}, fired: map[int]time.Duration{}}
	h.clock.Advance(time.Hour) // origin away from zero, as in real use
	cfg := Config{
		Tick:        testTick,
		WheelSize:   8, // small, so that tests reach high levels quickly
		FirstBlock:  64,
		TransferCap: 1 << 20,
		Clock:       h.clock,
		Tokens:      1 << 40,
		Limited:     true,
		Lanes:       2,
		OnPanic:     func(v any) { h.panics = append(h.panics, v) },
		Stats:       true,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	sh, err := New(cfg)
	require.NoError(t, err)
	h.sh = sh
	playShardGoroutine(t, sh)
	return h
}

// schedule files timer id and lets the shard goroutine pick it up at once.
func (h *harness) schedule(id int, delay time.Duration) Ref {
	h.t.Helper()
	r, rej := sched(h.sh, uint64(id), delay, func() {
		_, dup := h.fired[id]
		require.False(h.t, dup, "timer %d ran twice", id)
		h.fired[id] = h.clock.Now()
	})
	require.Equal(h.t, Accepted, rej)
	h.pass()
	return r
}

// pass runs one pass of the shard goroutine, holding the wheel as that
// goroutine does, checks the wheel's invariants after it, and waits until
// the runner has run what the pass handed it (settle).
func (h *harness) pass() {
	h.t.Helper()
	require.True(h.t, h.sh.holdForPass(), "the wheel is held")
	h.from = h.sh.h.w.elapsed
	h.sh.pass()
	h.sh.verify()
	h.sh.release()
	settleRuns(h.t, h.sh)
}

// passAsync runs one pass as pass does, and does not wait for the runner:
// for tests whose tasks block.
func (h *harness) passAsync() {
	h.t.Helper()
	require.True(h.t, h.sh.holdForPass(), "the wheel is held")
	h.from = h.sh.h.w.elapsed
	h.sh.pass()
	h.sh.verify()
	h.sh.release()
}

// step advances the clock by d in tick-sized moves, with a pass after each.
func (h *harness) step(d time.Duration) {
	for ; d > 0; d -= testTick {
		h.clock.Advance(min(d, testTick))
		h.pass()
	}
}

func (h *harness) pending() int64 { return h.sh.Live() }

// runOut sleeps as the shard goroutine does while nothing new arrives:
// to each tick it plans to wake for, with a pass there, until it plans to
// park untimed.
func (h *harness) runOut() {
	h.t.Helper()
	for {
		next, _, timed := h.sh.planHeld()
		if !timed {
			return
		}
		if d := h.sh.tickTime(next) - h.clock.Now(); d > 0 {
			h.clock.Advance(d)
		}
		h.pass()
	}
}

// sched schedules f on sh, delay from now by sh's clock.
func sched(sh *Shard, key uint64, delay time.Duration, f func()) (Ref, Reject) {
	return sh.Schedule(&Request{Key: key, Now: sh.clock.Now(), Delay: delay, Task: Task{Func: f}})
}

// schedIndexed is sched for an indexed timer.
func schedIndexed(sh *Shard, key uint64, delay time.Duration, f func()) (Ref, Reject) {
	return sh.Schedule(&Request{Key: key, Now: sh.clock.Now(), Delay: delay, Task: Task{Func: f}, Indexed: true})
}

// schedHandler is sched for handler h's timer.
func schedHandler(sh *Shard, key uint64, delay time.Duration, h uint16, indexed bool) (Ref, Reject) {
	return sh.Schedule(&Request{Key: key, Now: sh.clock.Now(), Delay: delay, Task: Task{Handler: h}, Indexed: indexed})
}

// holdWheel takes the wheel as a holder that does nothing, so that
// Schedules and earlier Resets meanwhile go to the queue and the
// attention stack; unhold lets go without taking them in, leaving them
// for the next pass.
func holdWheel(t testing.TB, sh *Shard) (unhold func()) {
	t.Helper()
	require.True(t, sh.tryHold(), "the wheel is free")
	return func() { sh.own.Store(sh.ownWord()) }
}

// passHeld runs one pass of the shard goroutine as it does, holding the
// wheel, and waits until the runner has run what it handed (settleRuns).
func passHeld(t testing.TB, sh *Shard) {
	t.Helper()
	require.True(t, sh.holdForPass(), "the wheel is held")
	sh.pass()
	sh.release()
	settleRuns(t, sh)
}

// sweepFrom makes sh sweep once at least n nodes are linked (minSweep is
// 4096): a test hook, before sh's goroutine starts or between passes.
func sweepFrom(sh *Shard, n int) {
	sh.h.sweep.min, sh.h.sweep.at = n, n
}

// tickExpect schedules timers due at chosen ticks and records the tick each
// must run at and the tick it ran at; its tasks fail the test on a second
// run or an early one.
type tickExpect struct {
	h    *harness
	want map[int]uint64 // timer id -> tick it must run at
	ran  map[int]uint64 // timer id -> tick it ran at (ranAt)
	refs map[int]Ref
}

func newTickExpect(h *harness) *tickExpect {
	return &tickExpect{h: h, want: map[int]uint64{}, ran: map[int]uint64{}, refs: map[int]Ref{}}
}

func (e *tickExpect) task(id int) func() {
	return func() {
		_, dup := e.ran[id]
		require.False(e.h.t, dup, "timer %d ran twice", id)
		e.ran[id] = e.ranAt(id)
		require.GreaterOrEqual(e.h.t, e.h.clock.Now(), e.h.sh.tickTime(e.want[id]), "timer %d ran early", id)
	}
}

// ranAt is the tick timer id ran at, as its task sees it: the pass that
// handed it over went from tick h.from to elapsed, and a timer that ran in
// it is on time if it was due in that range, at its tick; else it ran at
// elapsed, which the test sees differ from its tick.
func (e *tickExpect) ranAt(id int) uint64 {
	// The pass's target, from the clock, which moves only between passes:
	// the task may run while the pass still moves elapsed.
	el := e.h.sh.floorTick(e.h.clock.Now())
	if w := e.want[id]; e.h.from < w && w <= el {
		return w
	}
	return el
}

// scheduleAt schedules timer id due at tick due: a delay from the current
// clock reading that rounds up to it.
func (e *tickExpect) scheduleAt(id int, due uint64, r *rand.Rand) {
	sh := e.h.sh
	delay := sh.tickTime(due) - e.h.clock.Now() - time.Duration(r.Int64N(int64(testTick)))
	ref, rej := sched(sh, uint64(id), delay, e.task(id))
	require.Equal(e.h.t, Accepted, rej)
	e.want[id], e.refs[id] = dueAt(sh, due), ref
}

// dueAt is the elapsed tick at which a timer due at tick due runs, as its
// task reads it (after the pass that handed it to the runner): its own, or,
// when the shard goroutine has processed that tick already, the next one
// (it is fired in the next pass, which tests step a tick at a time).
func dueAt(sh *Shard, due uint64) uint64 { return max(due, sh.h.w.elapsed+1) }

// resetTo resets timer id to be due at tick due.
func (e *tickExpect) resetTo(id int, due uint64, r *rand.Rand) {
	sh := e.h.sh
	delay := sh.tickTime(due) - e.h.clock.Now() - time.Duration(r.Int64N(int64(testTick)))
	require.True(e.h.t, sh.Reset(e.refs[id], 0, delay))
	e.want[id] = dueAt(sh, sh.ceilTick(e.h.clock.Now()+max(delay, 0)))
}

// farLevelTwoSlot returns the number, first tick and width of the level-2
// slot three slots after the one elapsed is in: far enough that its window
// is not open yet.
func farLevelTwoSlot(w *wheel) (num, first, width uint64) {
	num = w.num(2, w.elapsed) + 3
	return num, num << (2 * w.shift), uint64(1) << (2 * w.shift)
}

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

// statsNow is Stats with the holder counters published first, as the
// shard goroutine's next pass would: tests that drive the wheel without
// that goroutine read them at once. It takes the wheel if it is free.
func (sh *Shard) statsNow() Stats {
	procPin()
	if sh.tryHold() {
		sh.publish()
		sh.letGo()
	}
	procUnpin()
	return sh.Stats()
}

// letGo is release without taking anything in, so that statsNow leaves
// the queue as it found it (tests count Queued after it). What producers
// pushed meanwhile (handshake step 2) it leaves to the shard goroutine,
// which it wakes.
func (sh *Shard) letGo() {
	word := sh.ownWord()
	sh.wrote(lineOwner)
	sh.letGoBy()
	stress.Point()
	if sh.own.Swap(word)&ownWanted != 0 || sh.queue.Waiting() || sh.attention.Waiting() {
		sh.signal()
	}
}

// heldTokens returns the pending tokens sh holds now, summed over its
// lanes.
func (sh *Shard) heldTokens() int64 {
	var q int64
	for i := range sh.lanes {
		q += sh.lanes[i].tokens.Load()
	}
	return q
}

// running reports whether the task of the timer r is running now (inline,
// or handed to the executor and not returned yet), and whether the caller
// is that task.
func (sh *Shard) running(r Ref) (running, self bool) {
	return sh.inFlight(runWordOf(r), goroutineToken())
}

// planHeld is plan as the shard goroutine makes it, holding the wheel:
// tests that drive passes themselves call it between passes.
func (sh *Shard) planHeld() (next uint64, park, timed bool) {
	if !sh.holdForPass() {
		panic("the wheel is held")
	}
	next, park, timed = sh.plan()
	word := sh.ownWord()
	sh.letGoBy()
	sh.own.Swap(word)
	return next, park, timed
}
