package shard

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Review tests: wheel sizes other than 8, clock jumps of many ticks and of
// whole level ranges, the worker sleeping exactly as plan says, resets and
// cancels while a higher slot is half cascaded, the pass budget shared with
// cascades, and the 38-bit tick field wrapping.

// reviewModel configures runReviewModel.
type reviewModel struct {
	size      int    // WheelSize
	maxDelay  uint64 // ticks; delays are log-uniform up to this
	jumpMax   uint64 // ticks; clock jumps are log-uniform up to this
	ops       int
	taskOps   bool   // tasks cancel, reset and schedule other timers
	burst     int    // schedule up to this many timers close together (< passBudget)
	startTick uint64 // move the clock this far from the origin first
}

type reviewTimer struct {
	id      int
	ref     Ref
	due     time.Duration // call clock reading + delay: never before
	eff     uint64        // the tick it must run at when the worker keeps up
	seq     int           // the pass the call was made after (or during)
	state   string        // pending, cancelled, ran
	history []string
}

// logUniform returns a value in [0, limit] whose bit length is uniform.
func logUniform(r *rand.Rand, limit uint64) uint64 {
	if limit == 0 {
		return 0
	}
	b := r.IntN(bits.Len64(limit) + 1)
	return min(r.Uint64N(uint64(1)<<b+1), limit)
}

// runReviewModel drives random schedules, cancels and resets (from the test
// and from tasks), clock jumps and planned sleeps, and checks after every
// pass: each timer runs at most once, never before call + delay, and in the
// first pass (after its call) whose target reaches its tick, or the next
// unprocessed tick; the worker never plans to sleep past a pending timer's
// tick nor parks untimed with one pending; the wheel verifies; and in the
// end every timer has ended exactly once.
func runReviewModel(t *testing.T, c reviewModel, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// One lane: transfers take timers in the order they were scheduled,
	// whichever P the test runs on, so that every seed is reproducible.
	h := newHarness(t, func(cfg *Config) { cfg.WheelSize, cfg.Lanes = c.size, 1 })
	sh := h.sh
	if c.startTick > 0 {
		h.clock.Advance(time.Duration(c.startTick) * testTick)
		h.pass()
	}
	var (
		timers     []*reviewTimer
		live       []*reviewTimer
		seq        int
		inPass     bool
		passTarget uint64
		fired      = map[int]bool{}
		err        error
	)
	fail := func(format string, a ...any) {
		if err == nil {
			err = fmt.Errorf(format, a...)
		}
	}
	arm := func(tm *reviewTimer, now, delay time.Duration) {
		tm.due = now + sh.clampDelay(delay)
		dtick := sh.ceilTick(tm.due)
		// A tick already processed cannot be run again: the next one.
		tm.eff = max(dtick, sh.h.w.elapsed+1)
		if inPass {
			tm.eff = max(dtick, passTarget+1)
		}
		tm.seq = seq
	}
	randDelay := func() time.Duration {
		d := time.Duration(logUniform(r, c.maxDelay)) * testTick
		switch r.IntN(4) {
		case 0:
			d += time.Duration(r.Int64N(int64(testTick)))
		case 1:
			d -= time.Duration(r.Int64N(int64(testTick)))
		}
		return d
	}
	var task func(id int) func()
	schedule := func(delay time.Duration) {
		now := h.clock.Now()
		tm := &reviewTimer{id: len(timers), state: "pending"}
		tm.history = append(tm.history, fmt.Sprintf("schedule %v at %v (after pass %d)", delay, now-sh.origin, seq))
		timers = append(timers, tm)
		live = append(live, tm)
		arm(tm, now, delay)
		ref, rej := sched(sh, uint64(tm.id), delay, task(tm.id))
		if rej != Accepted {
			fail("timer %d rejected: %v", tm.id, rej)
		}
		tm.ref = ref
	}
	cancel := func(tm *reviewTimer) {
		got := sh.Cancel(tm.ref)
		tm.history = append(tm.history, fmt.Sprintf("cancel (after pass %d) -> %v", seq, got))
		if got != (tm.state == "pending") {
			fail("timer %d: Cancel returned %v: %v", tm.id, got, tm.history)
		}
		if got {
			tm.state = "cancelled"
		}
	}
	reset := func(tm *reviewTimer, delay time.Duration) {
		now := h.clock.Now()
		got := sh.Reset(tm.ref, delay)
		tm.history = append(tm.history, fmt.Sprintf("reset %v at %v (after pass %d) -> %v", delay, now-sh.origin, seq, got))
		if got != (tm.state == "pending") {
			fail("timer %d: Reset returned %v: %v", tm.id, got, tm.history)
		}
		if got {
			arm(tm, now, delay)
		}
	}
	task = func(id int) func() {
		return func() {
			now, tm := h.clock.Now(), timers[id]
			tm.history = append(tm.history, fmt.Sprintf("ran at %v in pass %d at tick %d", now-sh.origin, seq, sh.h.w.elapsed))
			switch {
			case fired[id]:
				fail("timer %d ran twice: %v", id, tm.history)
			case tm.state != "pending":
				fail("timer %d ran after it ended: %v", id, tm.history)
			case now < tm.due:
				fail("timer %d ran early: %v", id, tm.history)
			}
			fired[id], tm.state = true, "ran"
			if c.taskOps && len(live) > 0 {
				for range r.IntN(3) {
					switch o := live[r.IntN(len(live))]; r.IntN(3) {
					case 0:
						cancel(o)
					case 1:
						reset(o, randDelay())
					default:
						schedule(randDelay())
					}
				}
			}
		}
	}
	// pass runs a pass, and the passes the worker makes at once after it.
	pass := func() {
		seq++
		inPass, passTarget = true, sh.floorTick(h.clock.Now())
		require.True(t, passHeld(t, sh))
		sh.verify()
		for sh.more {
			require.True(t, passHeld(t, sh))
			sh.verify()
		}
		inPass = false
		require.NoError(t, err)
		j := 0
		for _, tm := range live {
			if tm.state != "pending" {
				continue
			}
			if tm.seq < seq && tm.eff <= passTarget {
				require.Failf(t, "late", "timer %d due at tick %d still pending after the pass to %d: %v", tm.id, tm.eff, passTarget, tm.history)
			}
			live[j] = tm
			j++
		}
		live = live[:j]
	}
	// sleep moves the clock as the real worker sleeps (to a random point
	// of the planned tick) and passes; false when it parks untimed.
	sleep := func() bool {
		next, park, timed := sh.plan()
		first, any := uint64(0), false
		for _, tm := range live {
			if tm.state == "pending" && (!any || tm.eff < first) {
				first, any = tm.eff, true
			}
		}
		if !timed {
			require.False(t, any, "parked untimed with a timer pending at tick %d", first)
			return false
		}
		if any {
			require.LessOrEqual(t, next, first, "plans to sleep past a pending timer (park %v)", park)
		}
		if d := sh.tickTime(next) - h.clock.Now(); d > 0 {
			h.clock.Advance(d + time.Duration(r.Int64N(int64(testTick))))
		}
		pass()
		return true
	}
	for range c.ops {
		switch op := r.IntN(20); {
		case op < 6:
			schedule(randDelay())
			if r.IntN(2) == 0 {
				pass()
			}
		case op < 8:
			if len(live) > 0 {
				cancel(live[r.IntN(len(live))])
			}
		case op < 11:
			if len(live) > 0 {
				reset(live[r.IntN(len(live))], randDelay())
				if r.IntN(2) == 0 {
					pass()
				}
			}
		case op < 14:
			sleep()
		case op < 15 && c.burst > 0 && r.IntN(4) == 0:
			base := randDelay()
			span := time.Duration(logUniform(r, c.maxDelay/8)+1) * testTick
			for range 1 + r.IntN(c.burst) {
				schedule(base + time.Duration(r.Int64N(int64(span))))
			}
			pass() // within one pass budget: taken in at once
		case op < 15:
			h.clock.Advance(time.Duration(r.Int64N(int64(testTick))))
		case op < 16:
			// Land on a cascade deadline, just after it, on the window's
			// opening, or on the slot's first tick.
			if cc, ok := sh.h.w.nextCascade(); ok {
				to := []uint64{
					cc.deadline, cc.deadline + 1,
					sh.h.w.windowOpen(cc.level, cc.num), cc.num << (uint(cc.level) * sh.h.w.shift),
				}[r.IntN(4)]
				if to > sh.floorTick(h.clock.Now()) {
					h.clock.Advance(sh.tickTime(to) - h.clock.Now())
				}
			}
			pass()
		default:
			h.clock.Advance(time.Duration(logUniform(r, c.jumpMax)) * testTick)
			pass()
		}
		require.NoError(t, err)
	}
	for i := 0; sleep(); i++ {
		require.Less(t, i, 1_000_000, "the wheel does not run out")
	}
	for _, tm := range timers {
		require.NotEqual(t, "pending", tm.state, "timer %d never ended: %v", tm.id, tm.history)
		require.False(t, sh.Pending(tm.ref))
	}
	require.Zero(t, h.pending())
	require.Zero(t, sh.h.w.count)
}

func TestReviewModelWheelSizesAndClockJumps(t *testing.T) {
	seeds := uint64(6)
	switch {
	case raceEnabled: // one goroutine: the race detector only slows it down
		seeds = 1
	case testing.Short():
		seeds = 2
	}
	cases := []reviewModel{
		{size: 2, maxDelay: 1 << 12, jumpMax: 1 << 10, ops: 2000, taskOps: true},
		{size: 4, maxDelay: maxDelayTicks, jumpMax: 1 << 34, ops: 1000, taskOps: true},
		{size: 8, maxDelay: 1 << 14, jumpMax: 1 << 12, ops: 2000, taskOps: true},
		{size: 8, maxDelay: maxDelayTicks, jumpMax: 1 << 30, ops: 1000, taskOps: true},
		{size: 16, maxDelay: 1 << 16, jumpMax: 1 << 14, ops: 2000, taskOps: true},
		{size: 512, maxDelay: maxDelayTicks, jumpMax: 1 << 34, ops: 400, taskOps: true},
		{size: 65536, maxDelay: maxDelayTicks, jumpMax: 1 << 34, ops: 150, taskOps: true},
		// Many timers in few slots: tasks act on timers of their own tick.
		{size: 8, maxDelay: 4, jumpMax: 4, ops: 2000, taskOps: true},
		// Bursts beyond cascadeChunk: higher slots move in shares, with
		// resets and cancels in between.
		{size: 8, maxDelay: 1 << 14, jumpMax: 1 << 8, ops: 200, taskOps: true, burst: 3000},
		{size: 512, maxDelay: 1 << 20, jumpMax: 1 << 10, ops: 150, taskOps: true, burst: 3000},
		// Across the 38-bit wrap of the state word's tick field.
		{size: 8, maxDelay: 1 << 14, jumpMax: 1 << 12, ops: 2000, taskOps: true, startTick: 1<<ticksBits - 3000},
		{size: 4, maxDelay: 1 << 14, jumpMax: 1 << 12, ops: 2000, taskOps: true, startTick: 1<<ticksBits - 3000},
	}
	for i, c := range cases {
		for seed := range seeds {
			t.Run(fmt.Sprintf("%d/size%d/seed%d", i, c.size, seed), func(t *testing.T) {
				runReviewModel(t, c, seed)
			})
		}
	}
}

// reviewExpect schedules timer id due at tick due (a delay from the current
// clock reading that rounds up to it) and records the tick it must run at.
type reviewExpect struct {
	h    *harness
	want map[int]uint64 // timer id -> tick it must run at
	ran  map[int]uint64 // timer id -> tick it ran at
	refs map[int]Ref
}

func newReviewExpect(h *harness) *reviewExpect {
	return &reviewExpect{h: h, want: map[int]uint64{}, ran: map[int]uint64{}, refs: map[int]Ref{}}
}

func (e *reviewExpect) task(id int) func() {
	return func() {
		_, dup := e.ran[id]
		require.False(e.h.t, dup, "timer %d ran twice", id)
		e.ran[id] = e.h.sh.h.w.elapsed
		require.GreaterOrEqual(e.h.t, e.h.clock.Now(), e.h.sh.tickTime(e.want[id]), "timer %d ran early", id)
	}
}

func (e *reviewExpect) scheduleAt(id int, due uint64, r *rand.Rand) {
	sh := e.h.sh
	delay := sh.tickTime(due) - e.h.clock.Now() - time.Duration(r.Int64N(int64(testTick)))
	ref, rej := sched(sh, uint64(id), delay, e.task(id))
	require.Equal(e.h.t, Accepted, rej)
	e.want[id], e.refs[id] = dueAt(sh, due), ref
}

// dueAt is the elapsed tick at which a timer due at tick due runs: its own,
// or, when the worker has processed that tick already, the current one (it
// runs at the start of the next pass, before elapsed moves on).
func dueAt(sh *Shard, due uint64) uint64 { return max(due, sh.h.w.elapsed) }

func (e *reviewExpect) resetTo(id int, due uint64, r *rand.Rand) {
	sh := e.h.sh
	delay := sh.tickTime(due) - e.h.clock.Now() - time.Duration(r.Int64N(int64(testTick)))
	require.True(e.h.t, sh.Reset(e.refs[id], delay))
	e.want[id] = dueAt(sh, sh.ceilTick(e.h.clock.Now()+max(delay, 0)))
}

// farLevelTwoSlot returns the number, first tick and width of the level-2
// slot three slots after the one elapsed is in: far enough that its window
// is not open yet.
func farLevelTwoSlot(w *wheel) (num, first, width uint64) {
	num = w.num(2, w.elapsed) + 3
	return num, num << (2 * w.shift), uint64(1) << (2 * w.shift)
}

// TestReviewResetsAndCancelsDuringAPartialCascade fills one level-2 slot of
// an 8-slot wheel with more than cascadeChunk timers, so that it moves down
// in shares, and resets (earlier, later, across levels) and cancels timers
// both moved and not yet moved while it is half done. Stepping every tick,
// each timer runs at exactly its tick, and no pass moves more than two
// chunks (one per level whose window is open) plus the timers reset later,
// which their old slots re-file.
func TestReviewResetsAndCancelsDuringAPartialCascade(t *testing.T) {
	h := newHarness(t)
	sh, w := h.sh, h.sh.h.w
	r := rand.New(rand.NewPCG(3, 4))
	e := newReviewExpect(h)
	h.pass()
	num, first, width := farLevelTwoSlot(w)
	require.Equal(t, 2, w.levelFor(first))
	require.Equal(t, 2, w.levelFor(first+width-1))
	const n = 4000
	for id := range n {
		e.scheduleAt(id, first+r.Uint64N(width), r)
	}
	h.pass()
	si := w.slotIndex(2, num)
	require.Equal(t, n, int(w.slots[si].filed))
	cancelled := map[int]bool{}
	acted, later := false, 0
	for w.elapsed < first+width+200 {
		h.clock.Advance(testTick)
		h.pass()
		if !acted && w.slots[si].head != 0 && int(w.slots[si].filed) < n {
			acted = true // half moved: some timers are in level 1, some still here
			for range 600 {
				id := r.IntN(n)
				if _, ran := e.ran[id]; ran || cancelled[id] {
					continue
				}
				switch r.IntN(4) {
				case 0:
					require.True(t, sh.Cancel(e.refs[id]))
					cancelled[id] = true
					delete(e.want, id)
				case 1: // earlier, maybe already due
					e.resetTo(id, w.elapsed+r.Uint64N(e.want[id]-w.elapsed+1), r)
				case 2: // later, within the slot or beyond
					e.resetTo(id, e.want[id]+r.Uint64N(2*width), r)
					later++
				default: // much later: back to a higher level
					e.resetTo(id, e.want[id]+r.Uint64N(1<<9), r)
					later++
				}
			}
		}
		assert.LessOrEqual(t, sh.work.refiled, 2*cascadeChunk+later, "pass to tick %d", w.elapsed)
		for id, got := range e.ran {
			require.Equal(t, e.want[id], got, "timer %d ran at the wrong tick", id)
		}
	}
	require.True(t, acted, "the slot was never seen half moved")
	for w.count > 0 || sh.queue.Waiting() {
		h.clock.Advance(testTick)
		h.pass()
	}
	for id, want := range e.want {
		require.Equal(t, want, e.ran[id], "timer %d", id)
	}
	for id := range cancelled {
		require.NotContains(t, e.ran, id)
	}
	require.Zero(t, h.pending())
}

// TestReviewParkedShardWokenAcrossLevels parks a shard holding timers at
// every level of an 8-slot wheel and wakes it once after a jump of many
// ticks, including whole level ranges and their edges: the one pass runs
// exactly the timers due by then, and the rest run at their ticks with the
// worker sleeping as plan says.
func TestReviewParkedShardWokenAcrossLevels(t *testing.T) {
	var jumps []uint64
	for p := uint64(1); p < 1<<22; p *= 4 {
		jumps = append(jumps, p-1, p, p+1, 2*p-1, 2*p, 2*p+1, 3*p)
	}
	for _, jump := range jumps {
		t.Run(fmt.Sprint(jump), func(t *testing.T) {
			h := newHarness(t)
			sh := h.sh
			r := rand.New(rand.NewPCG(jump, 7))
			e := newReviewExpect(h)
			h.clock.Advance(time.Duration(r.Int64N(1 << 40))) // anywhere on the grid
			h.pass()
			id := 0
			for p := uint64(1); p < 1<<24; p *= 2 {
				for _, d := range []uint64{p - 1, p, p + 1, p + r.Uint64N(p)} {
					e.scheduleAt(id, sh.h.w.elapsed+max(d, 1), r)
					id++
				}
			}
			h.pass()
			_, _, timed := sh.plan()
			require.True(t, timed)
			h.clock.Advance(time.Duration(jump) * testTick)
			h.pass()
			reached := sh.h.w.elapsed
			for id, want := range e.want {
				_, ran := e.ran[id]
				require.Equal(t, want <= reached, ran, "timer %d due at %d, pass to %d", id, want, reached)
			}
			for {
				next, _, timed := sh.plan()
				if !timed {
					break
				}
				h.clock.Advance(sh.tickTime(next) - h.clock.Now() + time.Duration(r.Int64N(int64(testTick))))
				h.pass()
			}
			require.Len(t, e.ran, len(e.want))
			for id, want := range e.want {
				require.Equal(t, want, e.ran[id], "timer %d ran at the wrong tick", id)
			}
			require.Zero(t, h.pending())
		})
	}
}

// TestReviewCascadesUseThePassBudget has cascadeAhead move more than the
// pass budget in one pass: the transfer takes nothing in that pass but asks
// for another at once, which takes the waiting timers in at the same tick.
func TestReviewCascadesUseThePassBudget(t *testing.T) {
	h := newHarness(t)
	sh, w := h.sh, h.sh.h.w
	r := rand.New(rand.NewPCG(5, 6))
	e := newReviewExpect(h)
	h.pass()
	num, first, width := farLevelTwoSlot(w)
	const n = 9000
	for id := range n {
		e.scheduleAt(id, first+r.Uint64N(width), r)
	}
	for h.pass(); sh.more; h.pass() {
	}
	open, deadline := w.windowOpen(2, num), w.cascadeDeadline(2, num)
	h.clock.Advance(sh.tickTime(open) - h.clock.Now())
	h.pass() // the window opens: elapsed enters the slot before
	require.Equal(t, open, w.elapsed)
	unhold := holdWheel(t, sh) // the new timers wait in the queue
	for id := n; id < n+100; id++ {
		e.scheduleAt(id, w.elapsed+2, r)
	}
	unhold()
	h.clock.Advance(sh.tickTime(deadline-1) - h.clock.Now())
	h.pass()
	// Transfers and cascades do not starve each other: the pass takes the
	// new timers in and moves the rest of the slot, its share of the
	// window it slept through.
	assert.Equal(t, 100, sh.work.transferred)
	assert.Zero(t, w.slots[w.slotIndex(2, num)].head, "the slot moved down before its deadline")
	assert.False(t, sh.more)
	for w.count > 0 {
		h.clock.Advance(testTick)
		h.pass()
	}
	for id := range n {
		require.Equal(t, e.want[id], e.ran[id], "timer %d", id)
	}
	for id := n; id < n+100; id++ {
		require.Contains(t, e.ran, id) // never early: checked by the task
	}
}

// TestReviewTransferCapAboveThePassBudget takes a burst in with a cap per
// tick above the pass budget: a budget's worth, then the rest of the cap in
// the pass at once after it, then nothing more until the next tick.
func TestReviewTransferCapAboveThePassBudget(t *testing.T) {
	const capPerTick = passBudget + 1000
	h := newHarness(t, func(c *Config) { c.TransferCap = capPerTick })
	sh := h.sh
	h.pass()
	ran := 0
	total := 2*capPerTick + 5
	unhold := holdWheel(t, sh) // the burst waits in the queue
	for i := range total {
		_, rej := sched(sh, uint64(i), 0, func() { ran++ })
		require.Equal(t, Accepted, rej)
	}
	unhold()
	type step struct {
		advance     bool
		transferred int
		more        bool
	}
	for i, s := range []step{
		{true, passBudget, true}, {false, 1000, false}, {false, 0, false},
		{true, passBudget, true}, {false, 1000, false},
		{true, 5, false}, {true, 0, false},
	} {
		if s.advance {
			h.clock.Advance(testTick)
		}
		h.pass()
		assert.Equal(t, s.transferred, sh.work.transferred, "pass %d", i)
		assert.Equal(t, s.more, sh.more, "pass %d", i)
	}
	assert.Equal(t, total, ran)
	assert.Equal(t, uint64(2), sh.Stats().CapHits)
}

// TestReviewTickFieldWraps runs timers whose deadlines straddle a multiple
// of 2^38 ticks, where the state word's tick field wraps, with a reset
// later and one earlier across the wrap and a timer at MaxDelay.
func TestReviewTickFieldWraps(t *testing.T) {
	h := newHarness(t)
	sh := h.sh
	r := rand.New(rand.NewPCG(8, 9))
	e := newReviewExpect(h)
	const wrap = 1 << ticksBits
	h.clock.Advance(time.Duration(wrap-60) * testTick) // nothing filed: elapsed follows
	h.pass()
	require.Equal(t, uint64(wrap-60), sh.h.w.elapsed)
	for id := range 100 {
		e.scheduleAt(id, sh.h.w.elapsed+1+uint64(id), r)
	}
	e.scheduleAt(100, sh.h.w.elapsed+maxDelayTicks-2, r)
	h.pass()
	e.resetTo(10, wrap+500, r) // later, across the wrap
	e.resetTo(90, wrap-40, r)  // earlier, back before it
	for sh.h.w.elapsed < wrap+600 {
		h.clock.Advance(testTick)
		h.pass()
	}
	for id := range 100 {
		require.Equal(t, e.want[id], e.ran[id], "timer %d", id)
	}
	require.NotContains(t, e.ran, 100)
	for {
		next, _, timed := sh.plan()
		if !timed {
			break
		}
		h.clock.Advance(sh.tickTime(next) - h.clock.Now())
		h.pass()
	}
	require.Equal(t, e.want[100], e.ran[100], "the MaxDelay timer, at its tick")
	require.Zero(t, h.pending())
}

// TestReviewConcurrentProducersRealWorker runs the real worker on the real
// clock with small wheels (many levels, so many cascades) while producers
// schedule, reset and cancel concurrently: every accepted timer ends exactly
// once, and none runs before its latest deadline.
func TestReviewConcurrentProducersRealWorker(t *testing.T) {
	perProducer := 3000
	if testing.Short() || raceEnabled {
		perProducer = 1000
	}
	for _, size := range []int{4, 8, 64} {
		clock, _, _ := NewClock()
		var early, twice atomic.Int64
		sh, err := New(Config{
			Tick: time.Millisecond, WheelSize: size, FirstBlock: 64, TransferCap: 1 << 20,
			Clock: clock, Tokens: 1 << 30, Limited: true, Lanes: 4,
			OnPanic: func(v any) { t.Errorf("panic: %v", v) },
		})
		require.NoError(t, err)
		sh.Start()
		type timer struct {
			mu      sync.Mutex
			ref     Ref
			due     time.Duration
			ran     bool
			stopped bool
		}
		const producers = 4
		all := make([][]*timer, producers)
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(p), uint64(size)))
				var mine []*timer
				for range perProducer {
					x := &timer{}
					delay := time.Duration(r.IntN(300)) * time.Millisecond / 4
					x.mu.Lock()
					x.due = clock.Now() + delay
					ref, rej := sched(sh, 0, delay, func() {
						x.mu.Lock()
						defer x.mu.Unlock()
						if x.ran || x.stopped {
							twice.Add(1)
						}
						x.ran = true
						if clock.Now() < x.due {
							early.Add(1)
						}
					})
					x.ref = ref
					x.mu.Unlock()
					if rej != Accepted {
						t.Errorf("rejected: %v", rej)
						return
					}
					mine = append(mine, x)
					for range r.IntN(3) {
						o := mine[r.IntN(len(mine))]
						o.mu.Lock()
						if r.IntN(3) == 0 {
							if sh.Cancel(o.ref) {
								if o.ran || o.stopped {
									twice.Add(1)
								}
								o.stopped = true
							}
						} else {
							d := time.Duration(r.IntN(300)) * time.Millisecond / 4
							now := clock.Now()
							if sh.Reset(o.ref, d) {
								o.due = now + d
							}
						}
						o.mu.Unlock()
					}
					if r.IntN(50) == 0 {
						time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
					}
				}
				all[p] = mine
			}()
		}
		wg.Wait()
		require.Eventually(t, func() bool { return sh.Tokens() == 1<<30 }, 20*time.Second, time.Millisecond,
			"every timer ends")
		sh.Close()
		<-sh.Exited()
		for _, mine := range all {
			for _, x := range mine {
				x.mu.Lock()
				require.True(t, x.ran != x.stopped, "ended exactly once")
				require.False(t, sh.Pending(x.ref))
				x.mu.Unlock()
			}
		}
		require.Zero(t, early.Load(), "size %d: ran early", size)
		require.Zero(t, twice.Load(), "size %d: ended twice", size)
	}
}
