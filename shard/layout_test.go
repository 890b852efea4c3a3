package shard

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/pad"
)

// TestPaddedLayout checks the false-sharing padding: each lane fills whole
// cache lines, with its attention head on its producers' line, and the
// shard's read-mostly parked/closed flags and the worker's fields sit on
// different lines from the immutable fields.
func TestPaddedLayout(t *testing.T) {
	assert.Zero(t, unsafe.Sizeof(lane{})%pad.CacheLineSize, "lane is %d bytes", unsafe.Sizeof(lane{}))
	var l lane
	assert.Less(t, unsafe.Offsetof(l.queue)+unsafe.Sizeof(l.queue)-1, unsafe.Offsetof(l.quota)/pad.CacheLineSize*pad.CacheLineSize+pad.CacheLineSize,
		"the lane's counters follow its queue")
	assert.NotEqual(t, (unsafe.Offsetof(l.queue)+unsafe.Sizeof(l.queue)-1)/pad.CacheLineSize, unsafe.Offsetof(l.quota)/pad.CacheLineSize,
		"the queue's consumer line is not shared with the producers' counters")
	assert.Equal(t, unsafe.Offsetof(l.quota)/pad.CacheLineSize, unsafe.Offsetof(l.attention)/pad.CacheLineSize,
		"the lane's attention head sits on its producers' counter line")
	var sh Shard
	line := func(off uintptr) uintptr { return off / pad.CacheLineSize }
	parked := line(unsafe.Offsetof(sh.parked))
	assert.Equal(t, parked, line(unsafe.Offsetof(sh.closed)), "the flags producers read share a line")
	assert.NotEqual(t, parked, line(unsafe.Offsetof(sh.cfg)+unsafe.Sizeof(sh.cfg)-1), "immutable config")
	assert.NotEqual(t, parked, line(unsafe.Offsetof(sh.quiet)), "immutable fields")
	assert.Less(t, parked, line(unsafe.Offsetof(sh.stopped)), "worker-side fields start after the flags' line")
}

// TestRangeTable regenerates the range table of the package comment from
// the constants and checks that doc.go says the same.
func TestRangeTable(t *testing.T) {
	const size = 512
	levels := wheelLevels(size)
	require.Equal(t, 5, levels, "the table has one row per level")
	var b strings.Builder
	fmt.Fprintf(&b, "//\tlevel  slot width    reach at 1ms tick    reach at 10ms tick\n")
	for l := range levels {
		width := fmt.Sprintf("2^%d ticks", 8*l)
		if l == 0 {
			width = "1 tick"
		}
		reach := time.Duration(size) << (8 * l) // the level's ring
		suffix := ""
		if l == levels-1 {
			reach, suffix = maxDelayTicks, " (MaxDelay)"
		}
		fmt.Fprintf(&b, "//\t%-6d %-13s %-20s %s\n", l, width,
			humanSpan(reach*time.Millisecond)+suffix, humanSpan(reach*10*time.Millisecond)+suffix)
	}
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	want := strings.ReplaceAll(b.String(), " \n", "\n")
	assert.Contains(t, string(doc), want, "doc.go's range table is out of date; want:\n%s", want)
	// The horizon the package and README quote.
	assert.Equal(t, "795 days", humanSpan(maxDelayTicks*time.Millisecond))
	assert.Equal(t, "21.8 years", humanSpan(maxDelayTicks*10*time.Millisecond))
}

// humanSpan formats d the way the range table does.
func humanSpan(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d >= 1000*day:
		return fmt.Sprintf("%.1f years", d.Hours()/24/365.25)
	case d >= 100*day:
		return fmt.Sprintf("%d days", d/day)
	case d >= 5*day:
		return fmt.Sprintf("%.1f days", d.Hours()/24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%ds", d/time.Minute, d%time.Minute/time.Second)
	default:
		return d.String()
	}
}
