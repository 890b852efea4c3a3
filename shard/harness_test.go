package shard

import (
	"testing"
	"time"

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

// schedule files timer id and lets the "worker" pick it up at once.
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
