package shard

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testTick = time.Millisecond

// harness drives a shard without its goroutine: the test plays the worker,
// calling pass after moving the manual clock, so every outcome is exact.
type harness struct {
	t      testing.TB
	sh     *Shard
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
		Quota:       1 << 40,
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
	return h
}

// schedule files timer id and lets the "worker" pick it up at once, so its
// deadline is resolved at exactly the current clock reading.
func (h *harness) schedule(id int, delay time.Duration) Ref {
	h.t.Helper()
	r, rej := h.sh.Schedule(uint64(id), delay, func() {
		_, dup := h.fired[id]
		require.False(h.t, dup, "timer %d ran twice", id)
		h.fired[id] = h.clock.Now()
	})
	require.Equal(h.t, Accepted, rej)
	h.pass()
	return r
}

// pass runs one worker pass and checks the wheel's invariants after it.
func (h *harness) pass() {
	h.t.Helper()
	require.True(h.t, h.sh.pass())
	h.sh.verify()
}

// step advances the clock by d in tick-sized moves, with a pass after each.
func (h *harness) step(d time.Duration) {
	for ; d > 0; d -= testTick {
		h.clock.Advance(min(d, testTick))
		h.pass()
	}
}

func (h *harness) pending() int64 { return h.sh.cfg.Quota - h.sh.Quota() }

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
		h.schedule(1, d)
		require.Empty(t, h.fired, "not before the next tick")
		h.step(testTick)
		require.Contains(t, h.fired, 1, "delay %v", d)
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

func TestLongDelayKeptInTicksIsNeverEarly(t *testing.T) {
	// Delays of 2^38 ns and more are carried in whole ticks until the
	// worker resolves them; rounding must go up.
	h := newHarness(t, func(c *Config) { c.Tick = 7 * time.Millisecond })
	delay := time.Duration(1<<ticksBits) + 3
	now := h.clock.Now()
	r, rej := h.sh.Schedule(1, delay, func() {})
	require.Equal(t, Accepted, rej)
	dl, ok := h.sh.Deadline(r) // unresolved: earliest possible run
	require.True(t, ok)
	assert.GreaterOrEqual(t, dl, now+delay)
	require.True(t, h.sh.pass())
	dl, ok = h.sh.Deadline(r)
	require.True(t, ok)
	assert.GreaterOrEqual(t, dl, now+delay)
	assert.Less(t, dl, now+delay+2*h.sh.cfg.Tick)
}

func TestCancel(t *testing.T) {
	for _, transferred := range []bool{false, true} {
		h := newHarness(t)
		r, rej := h.sh.Schedule(1, 10*testTick, func() { t.Error("cancelled timer ran") })
		require.Equal(t, Accepted, rej)
		if transferred {
			h.pass()
		}
		assert.EqualValues(t, 1, h.pending())
		assert.True(t, h.sh.Cancel(r))
		assert.False(t, h.sh.Cancel(r), "second Cancel")
		assert.False(t, h.sh.Pending(r))
		assert.False(t, h.sh.Reset(r, time.Second))
		assert.Zero(t, h.pending())
		h.step(20 * testTick)
		assert.Zero(t, h.sh.w.count, "cancelled node left in the wheel")
	}
}

func TestCancelledNodeIsFreedAtNextPassNotAtItsSlot(t *testing.T) {
	h := newHarness(t)
	r := h.schedule(1, time.Hour)
	require.Equal(t, 1, h.sh.w.count)
	require.True(t, h.sh.Cancel(r))
	h.pass()
	assert.Zero(t, h.sh.w.count)
	// The freed node is the next one handed out, in a new generation.
	r2 := h.schedule(2, time.Hour)
	i1, g1 := r.split()
	i2, g2 := r2.split()
	assert.Equal(t, i1, i2)
	assert.Equal(t, g1+1, g2)
}

func TestStaleHandleNeverTouchesRecycledNode(t *testing.T) {
	h := newHarness(t)
	old := h.schedule(1, 5*testTick)
	h.step(10 * testTick)
	require.Contains(t, h.fired, 1)
	fresh := h.schedule(2, 5*testTick)
	oi, _ := old.split()
	fi, _ := fresh.split()
	require.Equal(t, oi, fi, "test needs the node to be reused")
	assert.False(t, h.sh.Cancel(old))
	assert.False(t, h.sh.Reset(old, time.Hour))
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
			r, rej := h.sh.Schedule(1, tt.first, func() { h.fired[1] = h.clock.Now() })
			require.Equal(t, Accepted, rej)
			if tt.at > 0 {
				h.pass()
				h.step(tt.at)
			}
			resetAt := h.clock.Now()
			require.True(t, h.sh.Reset(r, tt.reset))
			h.step(tt.first + tt.reset + 2*testTick)
			require.Contains(t, h.fired, 1)
			assert.GreaterOrEqual(t, h.fired[1], resetAt+tt.reset, "never before the new deadline")
			assert.LessOrEqual(t, h.fired[1], resetAt+tt.reset+2*testTick)
		})
	}
}

func TestTransferCapSpreadsBurstOverTicks(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TransferCap = 10 })
	for i := range 35 {
		_, rej := h.sh.Schedule(uint64(i), 0, func() { h.fired[i] = h.clock.Now() })
		require.Equal(t, Accepted, rej)
	}
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
	_, rej := h.sh.Schedule(1, testTick, func() { panic("boom") })
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
	inRing, rej := h.sh.Schedule(1, time.Hour, func() {})
	require.Equal(t, Accepted, rej)
	filed := h.schedule(2, time.Hour) // also transfers timer 1
	cancelled := h.schedule(3, time.Hour)
	require.True(t, h.sh.Cancel(cancelled))
	h.schedule(4, testTick)
	h.step(2 * testTick) // timer 4 runs
	late, rej := h.sh.Schedule(5, time.Hour, func() {})
	require.Equal(t, Accepted, rej)

	h.sh.Close()
	got := map[uint64]Ref{}
	h.sh.Drain(func(r Ref, key uint64, _ func()) { got[key] = r })
	assert.Equal(t, map[uint64]Ref{1: inRing, 2: filed, 5: late}, got)
	for _, r := range got {
		assert.False(t, h.sh.Pending(r))
		assert.False(t, h.sh.Cancel(r))
	}
	assert.Zero(t, h.pending())
	_, rej = h.sh.Schedule(6, time.Hour, func() {})
	assert.Equal(t, Closed, rej)
	assert.Zero(t, h.pending(), "a rejected Schedule leaves no trace")
}

func TestQuota(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Quota = 3 })
	var refs []Ref
	for i := range 3 {
		r, rej := h.sh.Schedule(uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
		refs = append(refs, r)
	}
	_, rej := h.sh.Schedule(9, time.Hour, func() {})
	require.Equal(t, NoTokens, rej)
	require.True(t, h.sh.Cancel(refs[0]))
	_, rej = h.sh.Schedule(9, time.Hour, func() {})
	require.Equal(t, Accepted, rej, "a cancelled timer frees its token")
}

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
				continue
			}
			// Leave it in the ring: the worker resolves it at the next
			// pass, which may be later than now, but never earlier.
			id := len(timers) - 1
			r, rej := h.sh.Schedule(uint64(id), delay, func() { h.fired[id] = h.clock.Now() })
			require.Equal(t, Accepted, rej)
			tm.ref = r
			tm.due = now + max(delay, 0)
			tm.latest = 1<<62 - 1 // lateness is bounded by the step, checked elsewhere
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
	require.Zero(t, h.sh.w.count)
}

// TestNodeFreedWhileQueuedStartsNextLifeClean is the regression test for a
// node that ended while on the attention stack (so the worker marked it
// detached) and was then reused: its next life must start "not yet
// transferred", or a Cancel of it while still in the ring frees it twice.
func TestNodeFreedWhileQueuedStartsNextLifeClean(t *testing.T) {
	h := newHarness(t)
	// Timers 1 and 2 are due at the same tick, 1 first in its slot. The
	// worker takes the whole slot, runs 1, whose task cancels 2: 2 ends
	// while on the attention stack, and the worker marks it detached.
	var two Ref
	cancelled := false
	_, rej := h.sh.Schedule(1, 5*testTick, func() { cancelled = h.sh.Cancel(two) })
	require.Equal(t, Accepted, rej)
	h.pass()
	two = h.schedule(2, 5*testTick)
	h.step(6 * testTick)
	require.True(t, cancelled)
	require.NotContains(t, h.fired, 2)

	// Reuse the freed nodes while they sit in the ring: resolve by Reset,
	// then cancel, so the attention stack sees them before the ring does.
	for i := range 8 {
		r, rej := h.sh.Schedule(uint64(10+i), time.Hour, func() { t.Error("cancelled timer ran") })
		require.Equal(t, Accepted, rej)
		require.True(t, h.sh.Reset(r, 2*time.Hour))
		require.True(t, h.sh.Cancel(r))
	}
	h.step(2 * testTick)
	// Each freed node must be on the free list once: the next timers get
	// distinct nodes and all run.
	seen := map[uint32]bool{}
	for i := range 16 {
		r := h.schedule(20+i, testTick)
		idx, _ := r.split()
		require.False(t, seen[idx], "node %d handed out twice", idx)
		seen[idx] = true
	}
	h.step(3 * testTick)
	assert.Len(t, h.fired, 16)
	assert.Zero(t, h.sh.w.count)
	assert.Zero(t, h.pending())
}
