package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/hist"
)

func TestSI(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 5: "5.00", 42.5: "42.5", 999: "999", 1234: "1.23k", 300_000: "300k", 1_234_567: "1.23M", 2e9: "2.00G"} {
		assert.Equal(t, want, si(v), v)
	}
}

func TestDur(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0", 450: "450ns", 1500: "1.50µs", 614 * time.Microsecond: "614µs",
		12345 * time.Microsecond: "12.3ms", 2 * time.Second: "2.00s"} {
		assert.Equal(t, want, dur(d), d)
	}
}

func TestTable(t *testing.T) {
	tb := &table{}
	tb.add("", "a", "bb")
	tb.add("group")
	tb.add("  row", "1", "")
	tb.add("  longer row", "123", "x")
	var b bytes.Buffer
	require.NoError(t, tb.write(&b))
	assert.Equal(t, ""+
		"                a  bb\n"+
		"group\n"+
		"  row           1\n"+
		"  longer row  123   x\n", b.String())
}

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
