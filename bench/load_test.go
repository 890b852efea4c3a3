package main

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPopulation(t *testing.T) {
	l := defaultLoad()
	p := l.population()
	// 300k/s × 5% × 15.5s time out; 300k/s × 95% × 101ms await a response.
	assert.Equal(t, 232500, p.streaming)
	assert.InDelta(t, 28785, p.inflight, 1)
	assert.Equal(t, 50000, p.conns)
	assert.Equal(t, l.Resident, p.total())

	l.Resident = 0
	p = l.population()
	assert.Zero(t, p.background, "no background below the stream's own steady state")
	assert.Greater(t, p.total(), 0)
}

func TestSplit(t *testing.T) {
	l := defaultLoad()
	l.Conns, l.Resident = 10, 1001
	parts := l.split(3)
	var conns, resident int
	var rate float64
	for _, p := range parts {
		conns += p.Conns
		resident += p.Resident
		rate += p.Rate
		assert.Equal(t, 1, p.Workers)
	}
	assert.Equal(t, 10, conns)
	assert.Equal(t, 1001, resident)
	assert.InDelta(t, l.Rate, rate, 1e-6)
}

func TestUniform(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		d := uniform(r, time.Second, 3*time.Second)
		assert.True(t, d >= time.Second && d <= 3*time.Second, d)
	}
}

func TestResidual(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lo, hi := time.Second, 30*time.Second
	const n = 200_000
	var sum float64
	var below int
	for range n {
		d := residual(r, lo, hi)
		assert.True(t, d >= 0 && d <= hi, d)
		sum += d.Seconds()
		if d < lo {
			below++
		}
	}
	// The equilibrium residual of a delay D has mean E[D²]/(2E[D]), and
	// P(residual < lo) = lo/E[D].
	a, b := lo.Seconds(), hi.Seconds()
	mean := (a*a + a*b + b*b) / 3 / (a + b)
	assert.InDelta(t, mean, sum/n, mean*0.01)
	assert.InDelta(t, a/((a+b)/2), float64(below)/n, 0.005)
}
