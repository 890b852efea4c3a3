package shard

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRandomOperationsAgainstModel drives random schedules (one-shot,
// periodic under each policy, and with slack), cancels, resets and clock
// steps and checks each outcome against a model of the promised
// semantics. FuzzOperations runs the same checks on fuzzer-chosen input.
func TestRandomOperationsAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, seed))
		ops := make([]byte, 3000)
		for i := range ops {
			ops[i] = byte(r.Uint32())
		}
		runModel(t, ops)
	}
}

func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 10, 1, 0, 3, 5, 2, 0, 40})
	f.Add([]byte{0, 255, 0, 0, 2, 1, 9, 3, 200, 3, 200, 3, 200})
	f.Add([]byte{5, 4, 5, 9, 6, 17, 3, 200, 2, 0, 3, 90, 1, 1, 6, 8, 3, 255, 2, 30, 3, 255})
	f.Fuzz(func(t *testing.T, ops []byte) { runModel(t, ops) })
}

// runModel interprets ops as a program: each instruction is an opcode
// byte and an argument byte.
func runModel(t *testing.T, ops []byte) {
	h := newHarness(t)
	type timer struct {
		ref     Ref
		due     time.Duration // earliest allowed run time
		latest  time.Duration // it must have run at the first pass from here
		state   string        // pending, cancelled or ran
		history []string
		// A periodic timer: its runs so far (the task appends), those
		// checked, and its grid since its start or last Reset; the i-th
		// run after that serves a grid point no earlier than
		// anchor + i*period, whatever the policy. state stays pending
		// while the series lives.
		series         bool
		runs           []time.Duration
		checked        int
		anchor, period time.Duration
		ordinal        int
	}
	var timers []*timer
	// arm sets a timer's window: never before due, and at the first pass
	// at or after due's tick, or the next tick if that one was processed.
	arm := func(tm *timer, now, delay time.Duration) {
		tm.due = now + max(delay, 0)
		tickDue := ceilTo(tm.due-h.sh.origin, testTick) + h.sh.origin
		nextTick := (now-h.sh.origin)/testTick*testTick + testTick + h.sh.origin
		tm.latest = max(tickDue, nextTick)
	}
	// armSeries starts a series' grid at now: its first run must come at
	// the first pass from its first point's tick.
	armSeries := func(tm *timer, now, period time.Duration) {
		tm.anchor, tm.period, tm.ordinal = now, period, 0
		arm(tm, now, period)
	}
	lastPass := h.clock.Now()
	check := func() {
		for id, tm := range timers {
			if tm.series {
				for ; tm.checked < len(tm.runs); tm.checked++ {
					ran := tm.runs[tm.checked]
					tm.history = append(tm.history, "ran at "+ran.String())
					require.Equal(t, "pending", tm.state, "series %d ran after it ended: %v", id, tm.history)
					tm.ordinal++
					require.GreaterOrEqual(t, ran, tm.anchor+time.Duration(tm.ordinal)*tm.period, "series %d ran early: %v", id, tm.history)
					require.Less(t, lastPass, tm.latest, "series %d ran late: %v", id, tm.history)
					// The next grid point is at most a period after
					// the run, whatever the policy.
					arm(tm, ran, tm.period)
				}
				if tm.state == "pending" {
					require.Less(t, h.clock.Now(), tm.latest, "series %d overdue: %v", id, tm.history)
				}
				continue
			}
			ran, ok := h.fired[id]
			if !ok || tm.state == "ran" {
				continue
			}
			require.Equal(t, "pending", tm.state, "timer %d ran after it ended: %v", id, tm.history)
			tm.state = "ran"
			tm.history = append(tm.history, "ran at "+ran.String())
			require.GreaterOrEqual(t, ran, tm.due, "timer %d ran early: %v", id, tm.history)
			require.Less(t, lastPass, tm.latest, "timer %d ran late: %v", id, tm.history)
		}
	}
	for i := 0; i+1 < len(ops); i += 2 {
		arg := time.Duration(ops[i+1])
		now := h.clock.Now()
		switch ops[i] % 7 {
		case 0: // schedule
			delay := arg*arg*testTick/16 - 2*testTick
			tm := &timer{state: "pending", history: []string{"schedule " + delay.String() + " at " + now.String()}}
			timers = append(timers, tm)
			if arg%2 == 0 {
				arm(tm, now, delay)
				tm.ref = h.schedule(len(timers)-1, delay)
				check() // a timer due at the call's tick may run in that pass
				continue
			}
			// Leave it in its queue: the shard goroutine files it at the next
			// pass, which may be a few ticks later, but its deadline
			// counts from now.
			id := len(timers) - 1
			r, rej := sched(h.sh, uint64(id), delay, func() { h.fired[id] = h.clock.Now() })
			require.Equal(t, Accepted, rej)
			tm.ref = r
			arm(tm, now, delay) // anchored at the call, not at the pass that files it
		case 1: // cancel
			if len(timers) == 0 {
				continue
			}
			tm := timers[int(arg)%len(timers)]
			got := h.sh.Cancel(tm.ref)
			tm.history = append(tm.history, "cancel")
			require.Equal(t, tm.state == "pending", got, "Cancel result: %v", tm.history)
			if got {
				tm.state = "cancelled"
			}
		case 2: // reset
			if len(timers) == 0 {
				continue
			}
			tm := timers[int(arg)%len(timers)]
			delay := arg * testTick / 3
			got := h.sh.Reset(tm.ref, 0, delay)
			tm.history = append(tm.history, "reset "+delay.String()+" at "+now.String())
			if tm.series {
				// A period below the tick is refused.
				require.Equal(t, tm.state == "pending" && delay >= testTick, got, "Reset result: %v", tm.history)
				if got {
					check() // runs before the Reset
					armSeries(tm, now, delay)
				}
			} else {
				require.Equal(t, tm.state == "pending", got, "Reset result: %v", tm.history)
				if got {
					arm(tm, now, delay)
				}
			}
			h.pass()
			check()
		case 5: // a periodic timer: period a quarter tick to 64 ticks, each policy
			period := (arg%64 + 1) * testTick / 4 * (1 + arg/64*3)
			tm := &timer{state: "pending", series: true,
				history: []string{fmt.Sprintf("every %v (policy %d) at %v", period, arg%3, now)}}
			timers = append(timers, tm)
			armSeries(tm, now, period)
			r, rej := schedSeries(h.sh, uint64(len(timers)-1), period, uint8(arg%3), func() {
				tm.runs = append(tm.runs, h.clock.Now())
			})
			require.Equal(t, Accepted, rej)
			tm.ref = r
			if arg%2 == 0 {
				h.pass()
				check()
			}
		case 6: // a timer with slack: may run until its delay plus slack
			delay := arg*arg*testTick/16 - 2*testTick
			slack := (arg % 17) * testTick * time.Duration(1+arg%5)
			tm := &timer{state: "pending", history: []string{fmt.Sprintf("slack %v+%v at %v", delay, slack, now)}}
			timers = append(timers, tm)
			arm(tm, now, delay)
			hiTick := max(h.sh.deadlineTick(now, delay), h.sh.floorTick(now+max(delay, 0)+slack))
			tm.latest = max(tm.latest, h.sh.tickTime(hiTick))
			id := len(timers) - 1
			r, rej := schedSlack(h.sh, uint64(id), delay, slack, func() {
				_, dup := h.fired[id]
				require.False(t, dup, "timer %d ran twice", id)
				h.fired[id] = h.clock.Now()
			})
			require.Equal(t, Accepted, rej)
			tm.ref = r
			if arg%2 == 0 {
				h.pass()
				check()
			}
		default: // step the clock by up to a few ticks
			lastPass = now
			h.clock.Advance(arg * testTick / 40)
			h.pass()
			check()
		}
	}
	// End the series; run everything out; each timer must have ended
	// exactly once.
	for _, tm := range timers {
		if tm.series && tm.state == "pending" {
			require.True(t, h.sh.Cancel(tm.ref))
			tm.state = "cancelled"
		}
	}
	for range 300*300/16 + 10 {
		lastPass = h.clock.Now()
		h.clock.Advance(testTick)
		h.pass()
		check()
	}
	for id, tm := range timers {
		require.NotEqual(t, "pending", tm.state, "timer %d never ended: %v", id, tm.history)
		require.False(t, h.sh.Pending(tm.ref))
	}
	require.Zero(t, h.pending())
	require.Zero(t, h.sh.h.w.count)
}

// wheelModel configures runWheelModel.
type wheelModel struct {
	size      int    // WheelSize
	maxDelay  uint64 // ticks; delays are log-uniform up to this
	jumpMax   uint64 // ticks; clock jumps are log-uniform up to this
	ops       int
	taskOps   bool   // tasks cancel, reset and schedule other timers
	burst     int    // schedule up to this many timers close together (< passBudget)
	startTick uint64 // move the clock this far from the origin first
}

// modelTimer is runWheelModel's view of one timer.
type modelTimer struct {
	id      int
	ref     Ref
	due     time.Duration // call clock reading + delay: never before
	eff     uint64        // the tick it must run at when the shard goroutine keeps up
	seq     int           // the pass the call was made after (or during)
	state   string        // pending, fired (its task not run yet), cancelled, ran
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

// runWheelModel drives random schedules, cancels and resets (from the test
// and from tasks), clock jumps and planned sleeps, and checks after every
// pass: each timer runs at most once, never before call + delay, and in the
// first pass (after its call) whose target reaches its tick, or the next
// unprocessed tick; the shard goroutine never plans to sleep past a pending timer's
// tick nor parks untimed with one pending; the wheel verifies; and in the
// end every timer has ended exactly once.
func runWheelModel(t *testing.T, c wheelModel, seed uint64) {
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
		timers     []*modelTimer
		live       []*modelTimer
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
	arm := func(tm *modelTimer, now, delay time.Duration) {
		tm.due = now + sh.clampDelay(delay)
		dtick := sh.ceilTick(tm.due)
		// A tick already processed cannot be run again: the next one. In
		// a pass (a task's call, on the runner, while the pass may still
		// move elapsed) that is the tick after the pass's target.
		if inPass {
			tm.eff = max(dtick, passTarget+1)
		} else {
			tm.eff = max(dtick, sh.h.w.elapsed+1)
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
		tm := &modelTimer{id: len(timers), state: "pending"}
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
	// firedUnrun: a task of this pass met the end of timer tm, due, while
	// the model has it pending: the pass fired it and handed its task to
	// the runner behind the task that looks. It must run before the pass
	// is over (checked after it).
	firedUnrun := func(tm *modelTimer, got bool) bool {
		if !got && inPass && tm.state == "pending" && h.clock.Now() >= tm.due {
			tm.state = "fired"
			return true
		}
		return false
	}
	cancel := func(tm *modelTimer) {
		got := sh.Cancel(tm.ref)
		tm.history = append(tm.history, fmt.Sprintf("cancel (after pass %d) -> %v", seq, got))
		if firedUnrun(tm, got) {
			return
		}
		if got != (tm.state == "pending") {
			fail("timer %d: Cancel returned %v: %v", tm.id, got, tm.history)
		}
		if got {
			tm.state = "cancelled"
		}
	}
	reset := func(tm *modelTimer, delay time.Duration) {
		now := h.clock.Now()
		got := sh.Reset(tm.ref, 0, delay)
		tm.history = append(tm.history, fmt.Sprintf("reset %v at %v (after pass %d) -> %v", delay, now-sh.origin, seq, got))
		if firedUnrun(tm, got) {
			return
		}
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
			tm.history = append(tm.history, fmt.Sprintf("ran at %v in pass %d (to tick %d)", now-sh.origin, seq, passTarget))
			switch {
			case fired[id]:
				fail("timer %d ran twice: %v", id, tm.history)
			case tm.state != "pending" && tm.state != "fired":
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
	// pass runs a pass, and the passes the shard goroutine makes at once after it.
	pass := func() {
		seq++
		inPass, passTarget = true, sh.floorTick(h.clock.Now())
		passHeld(t, sh)
		sh.verify()
		for sh.more {
			passHeld(t, sh)
			sh.verify()
		}
		inPass = false
		require.NoError(t, err)
		j := 0
		for _, tm := range live {
			if tm.state == "fired" {
				require.Failf(t, "unrun", "timer %d fired and never ran: %v", tm.id, tm.history)
			}
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
	// sleep moves the clock as the real shard goroutine sleeps (to a random point
	// of the planned tick) and passes; false when it parks untimed.
	sleep := func() bool {
		next, park, timed := sh.planHeld()
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

// TestModelAcrossWheelSizesClockJumpsAndTickWrap runs runWheelModel on
// wheels of 2 to 65536 slots, with clock jumps of many ticks and of whole
// level ranges, tasks that cancel, reset and schedule other timers, bursts
// that make higher slots cascade in shares, and deadlines across the 38-bit
// wrap of the state word's tick field.
func TestModelAcrossWheelSizesClockJumpsAndTickWrap(t *testing.T) {
	seeds := uint64(6)
	switch {
	case raceEnabled: // one goroutine: the race detector only slows it down
		seeds = 1
	case testing.Short():
		seeds = 2
	}
	cases := []wheelModel{
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
				runWheelModel(t, c, seed)
			})
		}
	}
}
