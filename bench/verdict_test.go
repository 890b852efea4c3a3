package main

import (
	"testing"

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
