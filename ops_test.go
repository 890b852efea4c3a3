package shardwheel_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// FuzzSchedulerOps runs fuzzer-chosen sequences of every public entry point
// (Schedule with any delay, nil tasks, Cancel, Reset, zero and foreign
// handles, Stop and use after Stop) and checks each result against a model.
// Timers either never fire during the run (delays of at least an hour) or
// fire at once, so the model knows which are pending.
func FuzzSchedulerOps(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0})
	f.Add([]byte{0, 200, 0, 201, 0, 255, 6, 0, 1, 1, 2, 1})
	s2, err := shardwheel.New(shardwheel.WithShards(1))
	require.NoError(f, err)
	foreign, err := s2.Schedule(1, time.Hour, func() {})
	require.NoError(f, err)
	f.Cleanup(func() { s2.Stop() })
	delays := []time.Duration{
		time.Hour, 2 * time.Hour, math.MaxInt64, math.MaxInt64 - 1, time.Duration(math.MaxInt64 / 2),
		0, -1, math.MinInt64, -time.Hour, 1,
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		s, err := shardwheel.New(shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
		require.NoError(t, err)
		defer s.Stop()
		type timer struct {
			tm   shardwheel.Timeout
			long bool // never fires during the test
			live bool // model: pending
		}
		var timers []*timer
		stopped := false
		for i := 0; i+1 < len(ops); i += 2 {
			arg := int(ops[i+1])
			pick := func() *timer {
				if len(timers) == 0 {
					return &timer{}
				}
				return timers[arg%len(timers)]
			}
			switch ops[i] % 8 {
			case 0, 1: // schedule
				d := delays[arg%len(delays)]
				tm, err := s.Schedule(uint64(arg), d, func() {})
				if stopped {
					require.ErrorIs(t, err, shardwheel.ErrStopped)
					continue
				}
				require.NoError(t, err)
				long := d >= time.Hour
				timers = append(timers, &timer{tm: tm, long: long, live: long})
			case 2: // nil task
				_, err := s.Schedule(1, time.Hour, nil)
				require.ErrorIs(t, err, shardwheel.ErrNilTask)
			case 3: // cancel
				tm := pick()
				got := tm.tm.Cancel()
				if tm.long || !got {
					require.Equal(t, tm.live, got)
				}
				tm.live = false
			case 4: // reset to another long delay
				tm := pick()
				got := tm.tm.Reset(delays[arg%5])
				if tm.long {
					require.Equal(t, tm.live, got)
				}
			case 5: // zero and foreign handles
				var zero shardwheel.Timeout
				require.False(t, zero.Cancel())
				require.False(t, zero.Reset(time.Second))
				require.True(t, foreign.Pending(), "a handle acts on its own scheduler only")
			case 6: // stop
				got := s.Stop()
				if stopped {
					require.Nil(t, got)
				}
				returned := map[shardwheel.Timeout]bool{}
				for _, tm := range got {
					returned[tm] = true
				}
				for _, tm := range timers {
					// Every pending long timer comes back; a short one
					// may too, if its tick had not come yet.
					if tm.long {
						require.Equal(t, tm.live, returned[tm.tm])
					}
					tm.live = false
				}
				stopped = true
			default: // accessors on any handle
				tm := pick()
				if tm.long {
					require.Equal(t, tm.live, tm.tm.Pending())
					require.Equal(t, tm.live, !tm.tm.Deadline().IsZero())
				}
			}
			want := 0
			for _, tm := range timers {
				if tm.live {
					want++
				}
			}
			if !stopped {
				// Short timers may still be pending for a tick or two.
				require.GreaterOrEqual(t, s.Pending(), want)
			} else {
				require.Zero(t, s.Pending())
			}
		}
	})
}
