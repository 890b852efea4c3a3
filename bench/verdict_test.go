package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPickWinner(t *testing.T) {
	c := func(name string, med, lo, hi float64) candidate {
		return candidate{name: name, med: med, lo: lo, hi: hi, ok: true}
	}
	assert.Equal(t, "a", pickWinner("lower", c("a", 80, 80, 80), c("b", 100, 100, 100)))
	assert.Equal(t, "b", pickWinner("higher", c("a", 80, 80, 80), c("b", 100, 100, 100)))
	assert.Equal(t, winTie, pickWinner("lower", c("a", 98, 98, 98), c("b", 100, 100, 100)), "within 5%")
	assert.Equal(t, winTie, pickWinner("lower", c("a", 80, 70, 95), c("b", 100, 90, 110)), "ranges overlap")
	assert.Equal(t, "a", pickWinner("lower", c("a", 80, 70, 85), c("b", 100, 90, 110)), "ranges apart")
	assert.Equal(t, "a = c", pickWinner("lower", c("a", 80, 80, 80), c("b", 100, 100, 100), c("c", 81, 81, 81)))
	assert.Equal(t, winTie, pickWinner("lower", c("a", 80, 80, 80), c("b", 82, 82, 82), c("c", 81, 81, 81)))
	assert.Empty(t, pickWinner("", c("a", 1, 1, 1), c("b", 2, 2, 2)), "a figure that rates nothing")
	assert.Empty(t, pickWinner("lower", c("a", 1, 1, 1), candidate{name: "b"}), "one measured")
	assert.Equal(t, winTie, pickWinner("lower", c("a", 0, 0, 0), c("b", 0, 0, 0)))
}

func TestFmtRatio(t *testing.T) {
	for _, tt := range []struct {
		r    float64
		ok   bool
		want string
	}{
		{0.8345, true, "0.83x"}, {1, true, "1.00x"}, {12.345, true, "12.35x"}, {0.1, true, "0.10x"},
		{0.0042, true, "0.0042x"}, {0.04567, true, "0.046x"}, {0, true, "0x"}, {0, false, "n/a"},
	} {
		assert.Equal(t, tt.want, fmtRatio(tt.r, tt.ok), "%v", tt.r)
	}
	_, ok := ratio(1, 0)
	assert.False(t, ok, "no ratio to a baseline of 0")
}

func TestPluralAndRange(t *testing.T) {
	assert.Equal(t, "1 run", plural(1, "run"))
	assert.Equal(t, "0 runs", plural(0, "run"))
	assert.Equal(t, "3 shards", plural(3, "shard"))
	show := func(v float64) string { return showDur(v) }
	assert.Equal(t, "1.12ms", withRange(show, 1.12e6, 1.12e6, 1.12e6), "one run: no range")
	assert.Equal(t, "1.12ms (1ms-1.5ms)", withRange(show, 1.12e6, 1e6, 1.5e6))
	assert.Equal(t, "65,536", groupDigits(65536))
	assert.Equal(t, "1,000,000", groupDigits(1_000_000))
	assert.Equal(t, "999", groupDigits(999))
}

// TestLateDiff: a later lateness p50 is put down to the tick only when it
// is within about a tick of the baseline's; beyond, it is stated plainly.
func TestLateDiff(t *testing.T) {
	ms := time.Millisecond
	assert.Equal(t, "+700µs (by design: deadlines round up to the 1ms tick)", lateDiff(1700*time.Microsecond, ms, ms, 1.7, true))
	assert.Equal(t, "+1.5ms (by design: deadlines round up to the 1ms tick)", lateDiff(2500*time.Microsecond, ms, ms, 2.5, true), "a tick and a half")
	assert.Equal(t, "+6ms (by design: deadlines round up to the 5ms tick)", lateDiff(7*ms, ms, 5*ms, 7, true), "within a longer tick")
	got := lateDiff(6*ms, ms, ms, 6, true)
	assert.Equal(t, "+5ms later (6.00x)", got)
	assert.NotContains(t, got, "by design")
	assert.Equal(t, "+2ms later", lateDiff(2*ms, 0, ms, 0, false), "no ratio to a baseline of 0")
	assert.Equal(t, "0.50x", lateDiff(ms, 2*ms, ms, 0.5, true), "earlier: the ratio")
	assert.Equal(t, "1.00x", lateDiff(ms, ms, ms, 1, true))
}

// TestBusyThreshold: one definition of a busy host, of the host's CPUs.
func TestBusyThreshold(t *testing.T) {
	assert.Equal(t, 0.25, busyCores(1), "a quarter of a core")
	assert.Equal(t, 0.25, busyCores(2))
	assert.InDelta(t, 1.6, busyCores(16), 1e-9, "a tenth of the CPUs, when more")
	cores, busy := otherBusy(500*time.Millisecond, 2*time.Second, 2)
	assert.Equal(t, 0.25, cores)
	assert.True(t, busy, "at the threshold")
	_, busy = otherBusy(400*time.Millisecond, 2*time.Second, 2)
	assert.False(t, busy)
	_, busy = otherBusy(time.Second, time.Second, 16)
	assert.False(t, busy, "1 core of 16 is below a tenth")
	_, busy = otherBusy(time.Second, 0, 2)
	assert.False(t, busy, "no window")
	r := &Result{Impl: nameWheel, Measured: time.Second, OtherCPU: 300 * time.Millisecond}
	assert.Contains(t, busyNote(r, 2), "WARNING: other processes kept 0.3 of 2 CPUs busy during the shardwheel run")
	assert.Empty(t, busyNote(r, 4), "0.3 of 4 CPUs is below 0.4")
}
