package shard

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFiresOnTheFirstTickAtOrAfterDeadline(t *testing.T) {
	// Sweep tick-1, tick, tick+1 around the first slot of every level of
	// an 8-slot wheel (levels at 1, 8, 64, 512, 4096 ticks), plus sub-tick
	// offsets: the task must run at the first tick boundary at or after
	// schedule time + delay, never before.
	for level := range 5 {
		base := time.Duration(math.Pow(8, float64(level))) * testTick
		for _, delta := range []time.Duration{-testTick, 0, testTick, 1, testTick / 2} {
			delay := base + delta
			t.Run(delay.String(), func(t *testing.T) {
				h := newHarness(t)
				h.clock.Advance(testTick / 3) // schedule off the tick grid
				start := h.clock.Now()
				h.schedule(1, delay)
				due := start + delay
				want := ceilTo(due-h.sh.origin, testTick) + h.sh.origin
				for h.clock.Now() < want-testTick {
					h.step(testTick)
					require.NotContains(t, h.fired, 1, "ran early at %v, due %v", h.clock.Now(), due)
				}
				h.step(2 * testTick)
				require.Contains(t, h.fired, 1)
				ran := h.fired[1]
				assert.GreaterOrEqual(t, ran, due, "never early")
				assert.Less(t, ran, due+testTick+testTick/3+1, "within a tick after the deadline")
				assert.Zero(t, h.pending())
			})
		}
	}
}

func ceilTo(d, unit time.Duration) time.Duration { return (d + unit - 1) / unit * unit }

func TestNonPositiveDelayRunsAtNextTick(t *testing.T) {
	for _, d := range []time.Duration{0, -1, -time.Hour, math.MinInt64} {
		h := newHarness(t)
		h.clock.Advance(testTick / 2) // inside a tick, as nearly every call is
		h.schedule(1, d)
		require.Empty(t, h.fired, "not before the next tick")
		h.step(testTick)
		require.Contains(t, h.fired, 1, "delay %v", d)
	}
}

// TestNonPositiveDelayOnATickBoundaryRunsAtOnce schedules at the very start
// of a tick the shard has processed: the first tick at or after the call is
// that one, so the timer runs in the pass that takes it in, not a tick
// later (and not before the call).
func TestNonPositiveDelayOnATickBoundaryRunsAtOnce(t *testing.T) {
	h := newHarness(t)
	h.pass()
	call := h.clock.Now()
	require.Equal(t, h.sh.tickTime(h.sh.h.w.elapsed), call, "on the boundary of the processed tick")
	h.schedule(1, 0)
	require.Contains(t, h.fired, 1)
	assert.Equal(t, call, h.fired[1])
}

// TestBurstBeyondTheBudgetRunsOnTime has more timers due at one tick than
// one pass takes in: those the first pass left in the queue run in the
// pass the shard goroutine makes at once after it, not a tick later.
func TestBurstBeyondTheBudgetRunsOnTime(t *testing.T) {
	h := newHarness(t)
	h.pass()
	ran := map[int]uint64{}
	unhold := holdWheel(t, h.sh) // the burst waits in the queue
	for i := range passBudget + 10 {
		_, rej := sched(h.sh, uint64(i), testTick, func() { ran[i] = h.sh.floorTick(h.clock.Now()) }) // the pass's tick: the clock moves between passes
		require.Equal(t, Accepted, rej)
	}
	unhold()
	due := h.sh.ceilTick(h.clock.Now() + testTick)
	h.clock.Advance(testTick)
	h.pass()
	require.Equal(t, due, h.sh.h.w.elapsed)
	require.True(t, h.sh.more, "budget reached: the shard goroutine passes again at once")
	assert.Len(t, ran, passBudget)
	h.pass() // at once: same tick, takes the last 10 in and runs them
	require.False(t, h.sh.more)
	require.Len(t, ran, passBudget+10, "every timer due at that tick has run")
	for i, at := range ran {
		require.Equal(t, due, at, "timer %d", i)
	}
}

func TestHugeDelayIsClampedNotWrapped(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	r := h.schedule(1, math.MaxInt64)
	dl, ok := h.sh.Deadline(r)
	require.True(t, ok)
	assert.GreaterOrEqual(t, dl, now+h.sh.MaxDelay())
	assert.Less(t, dl, now+h.sh.MaxDelay()+2*testTick)
	h.step(100 * testTick)
	assert.Empty(t, h.fired)
	assert.True(t, h.sh.Pending(r))
}

func TestLongDelayIsNeverEarly(t *testing.T) {
	// A delay of 2^38 ns and more, at a tick that does not divide it:
	// rounding to the tick grid must go up, before and after the shard goroutine
	// files the timer.
	h := newHarness(t, func(c *Config) { c.Tick = 7 * time.Millisecond })
	delay := time.Duration(1<<ticksBits) + 3
	now := h.clock.Now()
	r, rej := sched(h.sh, 1, delay, func() {})
	require.Equal(t, Accepted, rej)
	dl, ok := h.sh.Deadline(r) // still in its queue
	require.True(t, ok)
	assert.GreaterOrEqual(t, dl, now+delay)
	passHeld(t, h.sh)
	dl, ok = h.sh.Deadline(r)
	require.True(t, ok)
	assert.GreaterOrEqual(t, dl, now+delay)
	assert.Less(t, dl, now+delay+2*h.sh.cfg.Tick)
}

func TestCancel(t *testing.T) {
	for _, queued := range []bool{false, true} {
		h := newHarness(t)
		unhold := func() {}
		if queued {
			unhold = holdWheel(t, h.sh)
		}
		r, rej := sched(h.sh, 1, 10*testTick, func() { t.Error("cancelled timer ran") })
		require.Equal(t, Accepted, rej)
		unhold()
		assert.EqualValues(t, 1, h.pending())
		assert.True(t, h.sh.Cancel(r))
		assert.False(t, h.sh.Cancel(r), "second Cancel")
		assert.False(t, h.sh.Pending(r))
		assert.False(t, h.sh.Reset(r, 0, time.Second))
		assert.Zero(t, h.pending())
		h.step(20 * testTick)
		assert.Zero(t, h.sh.h.w.count, "cancelled node left in the wheel")
	}
}

// TestCancelAtOnceTakesTheNodeBack: a Cancel of the timer its P's shard
// filed last frees the node at once (the next Schedule gets it, in a new
// generation); a Cancel of any other leaves it held in the wheel until the
// wheel meets it: its slot comes due or cascades, a sweep passes, or a plan
// finds it at the head of the slot the goroutine would wake for next. No
// Cancel re-plans the goroutine's sleep: it wakes for the tick it planned,
// finds nothing due, and frees what it meets.
func TestCancelAtOnceTakesTheNodeBack(t *testing.T) {
	prev := runtime.GOMAXPROCS(1) // P 0, the harness shard's home
	defer runtime.GOMAXPROCS(prev)
	h := newHarness(t)
	r := h.schedule(1, time.Hour)
	require.Equal(t, 1, h.sh.h.w.count)
	require.True(t, h.sh.Cancel(r))
	assert.Zero(t, h.sh.h.w.count, "taken back")
	assert.EqualValues(t, 1, h.sh.statsNow().TakenBack)
	r2 := h.schedule(2, time.Hour)
	assert.Equal(t, r.idx, r2.idx, "the freed node is the next one handed out")
	assert.Equal(t, r.gen+1, r2.gen, "in a new generation")

	r3 := h.schedule(3, 5*testTick)
	require.True(t, h.sh.Cancel(r2), "not the last filed")
	assert.Equal(t, 2, h.sh.h.w.count, "held: a Cancel only marks the node")
	assert.Equal(t, 1, h.sh.statsNow().HeldCancelled)
	planned := h.sh.sleepUntil.Load()
	require.NotEqual(t, uint64(math.MaxUint64), planned, "the goroutine plans to wake for r3")
	require.True(t, h.sh.Cancel(r3))
	assert.Equal(t, 1, h.sh.h.w.count, "the last filed is taken back, the other stays held")
	assert.EqualValues(t, 2, h.sh.statsNow().TakenBack)
	assert.Equal(t, planned, h.sh.sleepUntil.Load(), "a Cancel leaves the planned wake alone")
	require.NotZero(t, h.sh.h.w.count, "held until a pass meets it")
	h.step(testTick)
	assert.Zero(t, h.sh.h.w.count, "the next pass frees the held node: the head of a slot it would wake for")
	assert.Zero(t, h.sh.statsNow().HeldCancelled)
	assert.Equal(t, uint64(math.MaxUint64), h.sh.sleepUntil.Load(), "nothing pending: parked untimed")
}

func TestStaleHandleNeverTouchesRecycledNode(t *testing.T) {
	h := newHarness(t)
	old := h.schedule(1, 5*testTick)
	h.step(10 * testTick)
	require.Contains(t, h.fired, 1)
	fresh := h.schedule(2, 5*testTick)
	require.Equal(t, old.idx, fresh.idx, "test needs the node to be reused")
	assert.False(t, h.sh.Cancel(old))
	assert.False(t, h.sh.Reset(old, 0, time.Hour))
	assert.False(t, h.sh.Pending(old))
	_, ok := h.sh.Deadline(old)
	assert.False(t, ok)
	assert.True(t, h.sh.Pending(fresh))
	h.step(10 * testTick)
	assert.Contains(t, h.fired, 2, "the new timer is unharmed")
}

func TestResetLaterIsLazyAndEarlierIsRefiled(t *testing.T) {
	tests := []struct {
		name  string
		first time.Duration
		at    time.Duration // when Reset is called
		reset time.Duration
	}{
		{"later", 10 * testTick, 5 * testTick, 10 * testTick},
		{"much later, across levels", 10 * testTick, 5 * testTick, 700 * testTick},
		{"earlier", 700 * testTick, 5 * testTick, 3 * testTick},
		{"earlier, already due", 700 * testTick, 5 * testTick, 0},
		{"before transfer", 10 * testTick, 0, 20 * testTick},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			r, rej := sched(h.sh, 1, tt.first, func() { h.fired[1] = h.clock.Now() })
			require.Equal(t, Accepted, rej)
			if tt.at > 0 {
				h.pass()
				h.step(tt.at)
			}
			resetAt := h.clock.Now()
			require.True(t, h.sh.Reset(r, 0, tt.reset))
			h.step(tt.first + tt.reset + 2*testTick)
			require.Contains(t, h.fired, 1)
			assert.GreaterOrEqual(t, h.fired[1], resetAt+tt.reset, "never before the new deadline")
			assert.LessOrEqual(t, h.fired[1], resetAt+tt.reset+2*testTick)
		})
	}
}

func TestTransferCapSpreadsBurstOverTicks(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TransferCap = 10 })
	unhold := holdWheel(t, h.sh) // they wait in the queue
	for i := range 35 {
		_, rej := sched(h.sh, uint64(i), 0, func() { h.fired[i] = h.clock.Now() })
		require.Equal(t, Accepted, rej)
	}
	unhold()
	h.pass() // moves the first 10 into the wheel, due at the next tick
	// Each tick moves 10 more; delay 0 makes them due at once.
	want := []int{20, 30, 35, 35}
	for _, w := range want {
		h.step(testTick)
		assert.Len(t, h.fired, w)
	}
}

func TestPanickingTaskDoesNotStopTheShard(t *testing.T) {
	h := newHarness(t)
	_, rej := sched(h.sh, 1, testTick, func() { panic("boom") })
	require.Equal(t, Accepted, rej)
	h.pass()
	h.schedule(2, 2*testTick)
	h.step(5 * testTick)
	assert.Equal(t, []any{"boom"}, h.panics)
	assert.Contains(t, h.fired, 2)
	assert.Zero(t, h.pending())
}

func TestDrainClaimsExactlyThePendingTimers(t *testing.T) {
	h := newHarness(t)
	unhold := holdWheel(t, h.sh)
	inQueue, rej := sched(h.sh, 1, time.Hour, func() {})
	require.Equal(t, Accepted, rej)
	unhold()
	filed := h.schedule(2, time.Hour) // its pass also transfers timer 1
	cancelled := h.schedule(3, time.Hour)
	require.True(t, h.sh.Cancel(cancelled))
	h.schedule(4, testTick)
	h.step(2 * testTick) // timer 4 runs
	unhold = holdWheel(t, h.sh)
	late, rej := sched(h.sh, 5, time.Hour, func() {}) // still in the queue
	require.Equal(t, Accepted, rej)
	unhold()
	handedOver, rej := sched(h.sh, 7, time.Hour, func() {})
	require.Equal(t, Accepted, rej)

	deadlines := map[uint64]time.Duration{}
	for key, r := range map[uint64]Ref{1: inQueue, 2: filed, 5: late, 7: handedOver} {
		d, ok := h.sh.Deadline(r)
		require.True(t, ok)
		deadlines[key] = d
	}
	assert.True(t, h.sh.Claimed(filed).IsZero(), "nothing is claimed before Drain")

	h.sh.Close()
	got := map[uint64]Ref{}
	dues := map[uint64]time.Duration{}
	h.sh.Drain(func(r Ref, key uint64, due time.Duration, task Task) bool {
		got[key], dues[key] = r, due
		assert.NotNil(t, task.Func, "Drain hands over the task")
		return key != 7 // the claimant keeps all but 7
	})
	assert.Equal(t, map[uint64]Ref{1: inQueue, 2: filed, 5: late, 7: handedOver}, got)
	assert.Equal(t, deadlines, dues)
	for key, r := range got {
		assert.False(t, h.sh.Pending(r))
		assert.False(t, h.sh.Cancel(r))
		assert.Equal(t, key != 7, h.sh.Claimed(r).Func != nil, "Claimed keeps the task of a kept timer only: %d", key)
	}
	for _, r := range []Ref{cancelled, {}, {idx: filed.idx, gen: filed.gen + 1}, {idx: filed.idx, gen: filed.gen - 1}, {idx: 1 << 31, gen: 1}} {
		assert.True(t, h.sh.Claimed(r).IsZero(), "%+v", r)
	}
	assert.Zero(t, h.pending())
	_, rej = sched(h.sh, 6, time.Hour, func() {})
	assert.Equal(t, Closed, rej)
	assert.Zero(t, h.pending(), "a rejected Schedule leaves no trace")
}

func TestTokens(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Tokens = 3 })
	var refs []Ref
	for i := range 3 {
		r, rej := sched(h.sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
		refs = append(refs, r)
	}
	_, rej := sched(h.sh, 9, time.Hour, func() {})
	require.Equal(t, NoTokens, rej)
	require.True(t, h.sh.Cancel(refs[0]))
	_, rej = sched(h.sh, 9, time.Hour, func() {})
	require.Equal(t, Accepted, rej, "a cancelled timer frees its token")
}

// TestNodeFreedWhileQueuedStartsNextLifeClean: a node that ended while on
// the attention stack (so the shard goroutine marked it detached) and was
// then reused starts its next life "not yet transferred", so that a Cancel
// of it while still in its queue does not free it twice.
func TestNodeFreedWhileQueuedStartsNextLifeClean(t *testing.T) {
	h := newHarness(t)
	// Timer 2 is reset earlier, onto the attention stack, and cancelled
	// there: it ends while on the stack, and the shard goroutine marks it
	// detached.
	h.schedule(1, 5*testTick)
	two := h.schedule(2, 5*testTick)
	require.True(t, h.sh.Reset(two, 0, 2*testTick))
	require.True(t, h.sh.Cancel(two))
	h.step(6 * testTick)
	require.Contains(t, h.fired, 1)
	require.NotContains(t, h.fired, 2)

	// Reuse the freed nodes while they sit in the queue (the wheel held):
	// reset, then cancel, so that the queue's holder finds them ended.
	unhold := holdWheel(t, h.sh)
	for i := range 8 {
		r, rej := sched(h.sh, uint64(10+i), time.Hour, func() { t.Error("cancelled timer ran") })
		require.Equal(t, Accepted, rej)
		require.True(t, h.sh.Reset(r, 0, 2*time.Hour))
		require.True(t, h.sh.Cancel(r))
	}
	unhold()
	h.step(2 * testTick)
	// Each freed node must be on the free list once: the next timers get
	// distinct nodes and all run.
	seen := map[uint32]bool{}
	for i := range 16 {
		r := h.schedule(20+i, testTick)
		require.False(t, seen[r.idx], "node %d handed out twice", r.idx)
		seen[r.idx] = true
	}
	h.step(3 * testTick)
	assert.Len(t, h.fired, 17, "timer 1 and the 16")
	assert.Zero(t, h.sh.h.w.count)
	assert.Zero(t, h.pending())
}

// TestHousekeepingStepWaitsForRoom: a housekeeping pass takes its larger
// step (milliseconds of sorting) only when the wheel needs no tick within
// housekeepSlack and the runner is not working through runs it has not
// started; with a timer due sooner the larger step is owed to the first
// pass after that timer's tick, without waking the goroutine at every
// tick before it; with the runner moving through runs it is owed to a pass
// housekeepSlack ticks later, which the goroutine wakes for, and with a
// burst's runs the pass sorts a smaller share, so the runs do not wait for
// a CPU it holds. A runner held by a blocked task defers nothing.
func TestHousekeepingStepWaitsForRoom(t *testing.T) {
	room := (housekeepSlack + 2) * testTick
	for _, tc := range []struct {
		name    string
		due     time.Duration
		runs    uint64 // handed to the runner, not started
		blocked bool   // the runner started none since the last look
		larger  bool
	}{
		{"a timer due within the slack", 3 * testTick, 0, false, false},
		{"a timer due at the slack", housekeepSlack * testTick, 0, false, false},
		{"room", room, 0, false, true},
		{"room, a burst's runs waiting", room, busyRuns, false, false},
		{"room, a few runs waiting", room, 3, false, false},
		{"room, a burst's runs behind a blocked task", room, busyRuns, true, true},
		{"a timer due within the slack, a burst's runs waiting", 3 * testTick, busyRuns, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.WheelSize = 64 })
			h.schedule(1, tc.due)
			sh := h.sh
			require.True(t, sh.tryHold())
			defer sh.release()
			sh.h.sort = 1 // housekeeping pending, as a review leaves it (never popped here)
			defer func() { sh.h.sort = 0 }()
			if tc.runs > 0 {
				sh.runner = &runner{sh: sh, handed: tc.runs}
				defer func() { sh.runner, sh.lookRunner = nil, nil }()
				if tc.blocked {
					sh.lookRunner, sh.lookClaimed = sh.runner, 0 // a look before: no run started since
				}
			}
			target := sh.h.w.elapsed
			sh.housekeepAt = target
			sweep, sort := sh.passStep(target)
			wake, ok := sh.h.w.nextWake()
			require.True(t, ok)
			switch {
			case tc.larger:
				assert.Equal(t, []int{sh.housekeepStep(), sh.housekeepStep()}, []int{sweep, sort})
				assert.Equal(t, target+sh.housekeepTicks(), sh.housekeepAt, "the next one in housekeepEvery")
				sweep, sort = sh.passStep(target)
				assert.Equal(t, []int{sweepPerPass, sweepPerPass}, []int{sweep, sort}, "a pass's share until then")
			case tc.runs > 0:
				want := sweepPerPass
				if tc.runs >= busyRuns {
					want = sh.busySortShare()
					assert.Less(t, want, sweepPerPass, "a pass sorts less while a burst's runs wait")
				}
				assert.Equal(t, []int{sweepPerPass, want}, []int{sweep, sort})
				if tc.due > housekeepSlack*testTick {
					assert.Equal(t, target+housekeepSlack, sh.housekeepAt, "owed to a pass housekeepSlack ticks later")
					next, park, timed := sh.plan()
					assert.True(t, park && timed)
					assert.Equal(t, sh.housekeepAt, next, "the goroutine wakes for it")
				} else {
					assert.Equal(t, wake+1, sh.housekeepAt)
				}
			default:
				assert.Equal(t, []int{sweepPerPass, sweepPerPass}, []int{sweep, sort})
				assert.Equal(t, wake+1, sh.housekeepAt, "the larger step is owed to the first pass after the timer's tick")
				next, park, timed := sh.plan()
				assert.True(t, park && timed)
				assert.Equal(t, wake, next, "the goroutine sleeps until the timer's tick, not each tick before it")
			}
			sh.h.sort = 0
			sweep, sort = sh.passStep(target)
			assert.Equal(t, []int{sweepPerPass, sweepPerPass}, []int{sweep, sort}, "no housekeeping: a pass's share")
		})
	}
}

// TestRunnerMoving: a runner needs a CPU for its waiting runs when it
// started one since the last look, or is woken and not yet scheduled; not
// while one task holds it.
func TestRunnerMoving(t *testing.T) {
	h := newHarness(t)
	sh := h.sh
	r := &runner{sh: sh, handed: 10}
	sh.runner = r
	defer func() { sh.runner, sh.lookRunner = nil, nil }()
	assert.True(t, sh.runnerMoving(), "a runner not looked at before")
	assert.False(t, sh.runnerMoving(), "no run started since")
	r.word.Store(2 << runShift)
	assert.True(t, sh.runnerMoving(), "two runs started")
	r.word.Store(2<<runShift | runWoken)
	assert.True(t, sh.runnerMoving(), "woken, waiting for a CPU")
	r.word.Store(3 << runShift)
	assert.True(t, sh.runnerMoving())
	assert.False(t, sh.runnerMoving(), "its task holds it")
}

// TestBusySortShare: a pass with a burst's runs waiting sorts about an eighth of a tick's worth
// of free nodes, within its bounds.
func TestBusySortShare(t *testing.T) {
	for _, tc := range []struct {
		tick time.Duration
		want int
	}{
		{time.Millisecond, sortShareMin},
		{10 * time.Millisecond, sweepPerPass},
		{4 * time.Millisecond, 2000},
	} {
		sh := &Shard{tick: int64(tc.tick)}
		assert.Equal(t, tc.want, sh.busySortShare(), "tick %v", tc.tick)
	}
}
