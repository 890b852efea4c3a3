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

// TestPaddedLayout checks the false-sharing padding. Go aligns a Shard to
// no more than 16 bytes, so what keeps two groups of fields off one cache
// line is distance: at least a line between the last byte of one group and
// the first of the next. The groups: the immutable fields; the owner word
// (every holder CASes it); the queue's and the attention stack's heads
// (producers that find the wheel held push there); the flags every
// Schedule reads (sleepUntil, closed, gid), which share a line only the
// shard goroutine writes; Stop's fields; the holder's state. A lane is one
// line of its own P's counters. The wheel, allocated apart, is padded on
// both sides.
func TestPaddedLayout(t *testing.T) {
	assert.Equal(t, uintptr(pad.CacheLineSize), unsafe.Sizeof(lane{}), "a lane is one line")
	var sh Shard
	end := func(off, size uintptr) uintptr { return off + size }
	apart := func(prevEnd, next uintptr, what string) {
		t.Helper()
		assert.GreaterOrEqual(t, next, prevEnd+pad.CacheLineSize, "%s: %d bytes apart", what, next-prevEnd)
	}
	apart(end(unsafe.Offsetof(sh.quiet), unsafe.Sizeof(sh.quiet)), unsafe.Offsetof(sh.own), "immutable fields, owner word")
	apart(end(unsafe.Offsetof(sh.own), unsafe.Sizeof(sh.own)), unsafe.Offsetof(sh.queue), "owner word, queue head")
	q := unsafe.Offsetof(sh.queue)
	apart(q+4, unsafe.Offsetof(sh.attention), "queue head (and its consumer's backlog), attention head")
	apart(unsafe.Offsetof(sh.attention)+4, unsafe.Offsetof(sh.sleepUntil), "attention head, flags")
	flags := unsafe.Offsetof(sh.sleepUntil)
	assert.Less(t, end(unsafe.Offsetof(sh.gid), unsafe.Sizeof(sh.gid))-flags, uintptr(pad.CacheLineSize), "the flags fit one line")
	apart(end(unsafe.Offsetof(sh.gid), unsafe.Sizeof(sh.gid)), unsafe.Offsetof(sh.stopped), "flags, Stop's fields")
	apart(end(unsafe.Offsetof(sh.claimed), unsafe.Sizeof(sh.claimed)), unsafe.Offsetof(sh.h), "Stop's fields, the holder's state")

	// The wheel is an allocation of its own: a line of padding on each
	// side of its fields keeps its neighbours in memory off them.
	var w wheel
	apart(0, unsafe.Offsetof(w.arena), "the wheel's start, its first field")
	apart(end(unsafe.Offsetof(w.coarseBase), unsafe.Sizeof(w.coarseBase)), unsafe.Sizeof(w), "the wheel's last field, its end")
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
