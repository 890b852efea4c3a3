package shardwheel

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/shard"
)

// TestKeyIndexPadding checks that each shard's index pointer has a whole
// cache line of padding on either side, so that two shards' keyed calls,
// or anything allocated beside the slice, never share its line.
func TestKeyIndexPadding(t *testing.T) {
	var ix keyIndex
	assert.GreaterOrEqual(t, unsafe.Offsetof(ix.m), uintptr(pad.CacheLineSize))
	assert.GreaterOrEqual(t, unsafe.Sizeof(ix)-unsafe.Offsetof(ix.m)-unsafe.Sizeof(ix.m), uintptr(pad.CacheLineSize))
}

// TestTimerEndedBeforeIndexedLeavesNoEntry covers the window between
// ScheduleKey's two steps: the timer is accepted, and ends (it runs, it is
// cancelled through its handle, Stop returns it) before add stores its
// entry. The worker found nothing to unindex then, so add must not leave
// the entry behind.
func TestTimerEndedBeforeIndexedLeavesNoEntry(t *testing.T) {
	for _, end := range []string{"ran", "cancelled", "stopped"} {
		t.Run(end, func(t *testing.T) {
			s, err := New(WithShards(1), WithTick(time.Millisecond))
			require.NoError(t, err)
			defer s.Stop()
			ran := make(chan struct{})
			delay := time.Hour
			if end == "ran" {
				delay = 0
			}
			r := s.request(1, delay, shard.Task{Func: func() { close(ran) }})
			r.Indexed = true
			tm, err := s.scheduleOn(s.shards[0], r)
			require.NoError(t, err)
			switch end {
			case "ran":
				<-ran
			case "cancelled":
				require.True(t, tm.Cancel())
			case "stopped":
				require.Len(t, s.Stop(), 1)
			}
			// Whether or not the worker has freed the node yet, the
			// entry must be gone as soon as add returns.
			got, err := s.index[0].add(1, func() (Timeout, error) { return tm, nil })
			require.NoError(t, err)
			require.Equal(t, tm, got)
			assert.Zero(t, IndexLen(s), "add left an entry for a timer that had ended")
			_, found := s.Lookup(1)
			assert.False(t, found)
		})
	}
}
