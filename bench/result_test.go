package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel/hist"
)

func TestIntervalPercentiles(t *testing.T) {
	var h hist.Histogram
	h.Record(int64(time.Second))
	a := h.Snapshot()
	for range 10 {
		h.Record(int64(time.Millisecond))
	}
	d := h.Snapshot().Sub(a)
	assert.Equal(t, time.Second, d.Percentiles().Max, "Sub keeps the all-time max")
	p := intervalPercentiles(d)
	assert.InDelta(t, time.Millisecond, p.Max, float64(time.Millisecond)*hist.RelativeError)
	assert.EqualValues(t, 10, p.Count)
}
