package shard

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/pad"
)

// TestPaddedLayout checks the padding that is not the Shard's own (see
// TestLineTable): a lane is one line, and the wheel, an allocation of its
// own, is padded on both sides.
func TestPaddedLayout(t *testing.T) {
	assert.Equal(t, uintptr(pad.CacheLineSize), unsafe.Sizeof(lane{}), "a lane is one line")
	end := func(off, size uintptr) uintptr { return off + size }
	apart := func(prevEnd, next uintptr, what string) {
		t.Helper()
		assert.GreaterOrEqual(t, next, prevEnd+pad.CacheLineSize, "%s: %d bytes apart", what, next-prevEnd)
	}
	var w wheel
	apart(0, unsafe.Offsetof(w.arena), "the wheel's start, its first field")
	apart(end(unsafe.Offsetof(w.coarseBase), unsafe.Sizeof(w.coarseBase)), unsafe.Sizeof(w), "the wheel's last field, its end")
}

// lineRow is a row of doc.go's cache-line table: a group name, the Shard
// fields it names and who writes them (its lines joined).
type lineRow struct {
	group   string
	fields  []string
	writers string
}

// lineTable reads the cache-line table of doc.go: the rows between its
// header and the next blank comment line, each column where the header's
// title starts, fields apart by a space. A line with no group continues
// the row above: its fields, if any, are that row's too.
func lineTable(t *testing.T) []lineRow {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	lines := strings.Split(string(doc), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "//\tgroup ") })
	require.NotEqual(t, -1, start, "doc.go has no cache-line table")
	header := strings.TrimPrefix(lines[start], "//\t")
	fieldsAt, byAt := strings.Index(header, "fields"), strings.Index(header, "written by")
	require.True(t, 0 < fieldsAt && fieldsAt < byAt, "header %q", header)
	var rows []lineRow
	for _, l := range lines[start+1:] {
		if !strings.HasPrefix(l, "//\t") {
			break
		}
		l = strings.TrimPrefix(l, "//\t")
		if len(l) < byAt {
			l += strings.Repeat(" ", byAt-len(l)) // a continuation of fields alone
		}
		group, fields := strings.TrimSpace(l[:fieldsAt]), strings.Fields(l[fieldsAt:byAt])
		writers := strings.TrimSpace(l[byAt:])
		require.True(t, l[fieldsAt-1] == ' ' && l[byAt-1] == ' ', "row %q is out of its columns", l)
		require.False(t, group != "" && writers == "", "row %q has no writers", l)
		if group == "" {
			require.NotEmpty(t, rows, "the table starts with a continuation line")
			last := &rows[len(rows)-1]
			last.fields = append(last.fields, fields...)
			last.writers = strings.TrimSpace(last.writers + " " + writers)
			continue
		}
		rows = append(rows, lineRow{group, fields, writers})
	}
	return rows
}

// fieldSpan returns the offset and size in a Shard of a field named as
// the table names them: a Shard field, or one of a Shard field's fields
// ("queue.in"). A struct's span ends at its last field that is not
// padding.
func fieldSpan(t *testing.T, name string) (off, size uintptr) {
	typ := reflect.TypeFor[Shard]()
	for _, part := range strings.Split(name, ".") {
		f, ok := typ.FieldByName(part)
		require.True(t, ok, "the table names %q, which Shard does not have", name)
		off += f.Offset
		size = dataSize(f.Type)
		typ = f.Type
	}
	return off, size
}

// dataSize is the size of t up to the end of its last field that is not
// padding.
func dataSize(t reflect.Type) uintptr {
	if t.Kind() != reflect.Struct {
		return t.Size()
	}
	var end uintptr
	for i := range t.NumField() {
		if f := t.Field(i); f.Name != "_" {
			end = f.Offset + dataSize(f.Type)
		}
	}
	return end
}

// TestLineTable checks doc.go's cache-line table against the Shard's
// layout: a Shard is allocated whole pages (over 32 KiB: the runtime's
// large objects start on a page), so a field's cache lines are its offset
// and end divided by the line size; the groups the table names share no
// line, and every other field of the Shard lies on the lines of at most
// one group. Lanes are one line each and start on one.
func TestLineTable(t *testing.T) {
	require.Greater(t, unsafe.Sizeof(Shard{}), uintptr(32<<10), "a Shard must be a large allocation, page-aligned")
	rows := lineTable(t)
	require.Len(t, rows, 11)
	type span struct{ first, last uintptr }
	lineOf := func(off, size uintptr) span {
		return span{off / pad.CacheLineSize, (off + size - 1) / pad.CacheLineSize}
	}
	group := map[uintptr]string{} // line -> the group on it
	listed := map[string]bool{}
	for _, r := range rows {
		for _, f := range r.fields {
			listed[strings.Split(f, ".")[0]] = true
			sp := lineOf(fieldSpan(t, f))
			for l := sp.first; l <= sp.last; l++ {
				if g, ok := group[l]; ok && g != r.group {
					t.Errorf("line %d holds %s of group %s and a field of group %s", l, f, r.group, g)
				}
				group[l] = r.group
			}
		}
	}
	typ := reflect.TypeFor[Shard]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "_" || listed[f.Name] || f.Name == "queue" {
			continue
		}
		sp := lineOf(f.Offset, dataSize(f.Type))
		seen := map[string]bool{}
		for l := sp.first; l <= sp.last; l++ {
			if g, ok := group[l]; ok {
				seen[g] = true
			}
		}
		assert.LessOrEqual(t, len(seen), 1, "field %s lies on the lines of groups %v", f.Name, seen)
	}

	for _, lanes := range []int{1, 2, 3, 8, 64} {
		sh, err := New(Config{Tick: testTick, WheelSize: 8, TransferCap: 1, Lanes: lanes, OnPanic: func(any) {}})
		require.NoError(t, err)
		assert.Zero(t, uintptr(unsafe.Pointer(&sh.lanes[0]))%pad.CacheLineSize, "%d lanes: the first starts a line", lanes)
	}
}

// TestHoldersFeedTheLaneThatTookNodes: a producer that does not hold the
// wheel takes its node from its own lane of the arena's free lists (Get
// pops that lane first) and counts it there; the holder that lets go next
// feeds that lane, not another (share), so the producer's next node is
// its own lane's.
func TestHoldersFeedTheLaneThatTookNodes(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Lanes = 4 })
	for i := range shareMin + 8 { // they run, and leave their nodes on the holder's list
		_, rej := sched(h.sh, uint64(i), testTick, func() {})
		require.Equal(t, Accepted, rej)
	}
	h.step(2 * testTick)
	require.Zero(t, h.pending())
	require.GreaterOrEqual(t, h.sh.h.nfree, shareMin)
	_, _, ok := h.sh.takeShared(2, &h.sh.lanes[2]) // lane 2: empty, so it grows
	require.True(t, ok)
	assert.True(t, h.sh.starved.Load())
	assert.EqualValues(t, 1, h.sh.lanes[2].demand.Load())
	h.pass() // a holder lets go: it feeds lane 2
	assert.False(t, h.sh.starved.Load())
	_, _, own, ok := h.sh.arena.GetOwn(2)
	require.True(t, ok)
	assert.True(t, own, "lane 2 was fed")
	for _, other := range []int{0, 1, 3} {
		_, _, own, ok = h.sh.arena.GetOwn(other)
		require.True(t, ok)
		assert.False(t, own, "lane %d was not fed: its Get took another's node", other)
	}
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
