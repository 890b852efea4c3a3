package shard

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRandomOperationsAgainstModel drives random schedules, cancels, resets
// and clock steps and checks each outcome against a model of the promised
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
	lastPass := h.clock.Now()
	check := func() {
		for id, tm := range timers {
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
		switch ops[i] % 5 {
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
			require.Equal(t, tm.state == "pending", got, "Reset result: %v", tm.history)
			if got {
				arm(tm, now, delay)
			}
			h.pass()
			check()
		default: // step the clock by up to a few ticks
			lastPass = now
			h.clock.Advance(arg * testTick / 40)
			h.pass()
			check()
		}
	}
	// Run everything out; each timer must have ended exactly once.
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
