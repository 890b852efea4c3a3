package shard

import (
	"fmt"
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
			// Leave it in its queue: the worker files it at the next
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
			got := h.sh.Reset(tm.ref, delay)
			tm.history = append(tm.history, "reset "+delay.String()+" at "+now.String())
			if tm.series {
				// A period <= 0 is refused.
				require.Equal(t, tm.state == "pending" && delay > 0, got, "Reset result: %v", tm.history)
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
