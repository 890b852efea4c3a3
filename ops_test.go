package shardwheel_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// FuzzSchedulerOps runs fuzzer-chosen sequences of every public entry point
// (AfterFunc with any delay, nil tasks, Cancel, Reset, zero and foreign
// handles, Stop and use after Stop, the keyed calls Index.AfterFunc,
// Index.Cancel, Index.Reset and Index.Lookup on four keys that plain timers use too,
// Every with long and short periods under each policy, Slack,
// and CancelWait) and checks each result against a model.
// Timers either never fire during the run (delays of at least an hour) or
// fire at once, so the model knows which are pending; a periodic timer
// lives until it is cancelled or stopped, whatever its period.
func FuzzSchedulerOps(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0})
	f.Add([]byte{0, 200, 0, 201, 0, 255, 6, 0, 1, 1, 2, 1})
	f.Add([]byte{0, 5, 0, 6, 4, 1, 7, 1, 3, 0, 6, 0, 0, 1, 3, 1, 4, 1})
	f.Add([]byte{8, 0, 8, 4, 11, 0, 9, 0, 9, 4, 8, 1, 10, 1, 0, 1, 9, 1, 8, 5, 11, 5, 6, 0, 9, 1, 8, 2})
	f.Add([]byte{12, 0, 12, 9, 13, 3, 13, 6, 14, 0, 4, 1, 14, 1, 14, 2, 7, 3, 3, 4, 6, 0, 12, 1, 13, 1})
	s2, err := shardwheel.New(shardwheel.WithShards(1))
	require.NoError(f, err)
	foreign, err := s2.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(1))
	require.NoError(f, err)
	f.Cleanup(func() { s2.Stop() })
	delays := []time.Duration{
		time.Hour, 2 * time.Hour, math.MaxInt64, math.MaxInt64 - 1, time.Duration(math.MaxInt64 / 2),
		0, -1, math.MinInt64, -time.Hour, 1,
	}
	const longDelays = 5 // delays[:longDelays] never fire during a run
	f.Fuzz(func(t *testing.T, ops []byte) {
		s, err := shardwheel.New(shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
		require.NoError(t, err)
		ix := shardwheel.NewIndex[uint64](s)
		defer s.Stop()
		h, err := s.NewHandler(func(uint64) {}) // its timers carry no closure

		require.NoError(t, err)
		type timer struct {
			tm   shardwheel.Timer
			long bool // never fires during the test
			live bool // model, for long timers: pending
			open bool // model, for short timers: may still be pending
			// runs: a series that runs during the test, whose run Stop
			// may find handed to its runner (then Stop keeps that run as
			// its last and does not return it)
			runs bool
		}
		var timers []*timer
		known := map[shardwheel.Timer]*timer{}
		indexed := map[uint64]*timer{} // model of the index: each key's indexed timer
		stopped := false
		add := func(tm shardwheel.Timer, key uint64, d time.Duration) *timer {
			require.Equal(t, key, tm.Key())
			long := d >= time.Hour
			tr := &timer{tm: tm, long: long, live: long, open: !long}
			require.Nil(t, known[tm], "AfterFunc returned a handle it had returned before")
			known[tm] = tr
			timers = append(timers, tr)
			return tr
		}
		// keyedResult checks got, a keyed call's result on a key whose
		// indexed timer the model says is cur: it must be true while cur
		// is a live long timer, may be for a short one not known to have
		// ended (false then tells that it has), and must not be otherwise.
		keyedResult := func(cur *timer, got bool) {
			switch {
			case cur == nil:
				require.False(t, got, "a keyed call found a timer on a key with none")
			case cur.long:
				require.Equal(t, cur.live, got)
			case got:
				require.True(t, cur.open, "a keyed call found a short timer known to have ended")
			default:
				cur.open = false
			}
		}
		for i := 0; i+1 < len(ops); i += 2 {
			arg := int(ops[i+1])
			pick := func() *timer {
				if len(timers) == 0 {
					return &timer{}
				}
				return timers[arg%len(timers)]
			}
			switch ops[i] % 15 {
			case 0, 1: // schedule: a closure (0) or the Handler (1)
				d := delays[arg%len(delays)]
				var tm shardwheel.Timer
				var err error
				if ops[i]%12 == 0 {
					tm, err = s.AfterFunc(d, func() {}, shardwheel.ByKey(uint64(arg)))
				} else {
					tm, err = h.AfterFunc(uint64(arg), d, shardwheel.ByKey(uint64(arg)))
				}
				if stopped {
					require.ErrorIs(t, err, shardwheel.ErrStopped)
					continue
				}
				require.NoError(t, err)
				add(tm, uint64(arg), d)
			case 2: // nil task
				_, err := s.AfterFunc(time.Hour, nil, shardwheel.ByKey(1))
				require.ErrorIs(t, err, shardwheel.ErrNilTask)
			case 3: // cancel
				tm := pick()
				got := tm.tm.Cancel()
				if tm.long {
					require.Equal(t, tm.live, got)
				} else if got {
					require.True(t, tm.open, "Cancel won for a short timer known to have ended")
				}
				tm.live, tm.open = false, false
			case 4: // reset to a long delay
				tm := pick()
				got := tm.tm.Reset(delays[arg%longDelays])
				if tm.long {
					require.Equal(t, tm.live, got)
				} else if got {
					// The short timer had not run yet: it is now a long one.
					require.True(t, tm.open, "Reset won for a short timer known to have ended")
					tm.long, tm.live, tm.open = true, true, false
				} else {
					tm.open = false // Reset lost: the timer has ended
				}
			case 5: // zero and foreign handles
				var zero shardwheel.Timer
				require.False(t, zero.Cancel())
				require.False(t, zero.Reset(time.Second))
				require.True(t, foreign.Pending(), "a handle acts on its own scheduler only")
			case 6: // stop
				got := s.Stop()
				if stopped {
					require.Nil(t, got)
				}
				returned := map[shardwheel.Timer]bool{}
				for _, tm := range got {
					tr := known[tm]
					require.NotNil(t, tr, "Stop returned a handle AfterFunc never did")
					require.False(t, returned[tm], "Stop returned a timer twice")
					require.True(t, tr.live || tr.open, "Stop returned a timer that had ended")
					require.NotNil(t, tm.Task(), "Stop returned a timer without its task")
					returned[tm] = true
				}
				for _, tm := range timers {
					// Every pending long timer comes back; a short one
					// may too, if its tick had not come yet.
					switch {
					case tm.long && tm.runs:
						if returned[tm.tm] {
							require.True(t, tm.live, "Stop returned a series that had ended")
						}
					case tm.long:
						require.Equal(t, tm.live, returned[tm.tm])
					}
					tm.live, tm.open = false, false
				}
				stopped = true
				require.Zero(t, indexLen(ix), "Stop empties the index")
			case 8: // Index.AfterFunc (routed by the key's hash or by ByKey): replaces the key's indexed timer
				key, d := uint64(arg%4), delays[arg/4%len(delays)]
				var tm shardwheel.Timer
				var err error
				route := key // the key its handle carries
				if arg/4%2 == 0 {
					tm, err = ix.AfterFunc(key, d, func() {})
					route = tm.Key() // the key's hash
				} else {
					tm, err = ix.AfterFunc(key, d, func() {}, shardwheel.ByKey(key))
				}
				if stopped {
					require.ErrorIs(t, err, shardwheel.ErrStopped)
					continue
				}
				require.NoError(t, err)
				if old := indexed[key]; old != nil {
					require.False(t, old.tm.Pending(), "the replaced timer has ended")
					old.live, old.open = false, false
				}
				indexed[key] = add(tm, route, d)
			case 9: // Index.Cancel
				key := uint64(arg % 4)
				cur := indexed[key]
				keyedResult(cur, ix.Cancel(key))
				if cur != nil {
					cur.live, cur.open = false, false
				}
				delete(indexed, key)
			case 10: // Index.Reset to a long delay
				key := uint64(arg % 4)
				cur := indexed[key]
				got := ix.Reset(key, delays[arg%longDelays])
				keyedResult(cur, got)
				if got && !cur.long {
					cur.long, cur.live, cur.open = true, true, false
				}
			case 12: // Every: a long or a short period, each policy, a closure or the Handler
				period := []time.Duration{time.Hour, time.Millisecond, math.MaxInt64, time.Microsecond}[arg%4]
				missed := shardwheel.MissedPolicy(arg / 4 % 3)
				var tm shardwheel.Timer
				var err error
				if arg/12%2 == 0 {
					tm, err = s.Every(period, func() {}, shardwheel.ByKey(uint64(arg)), shardwheel.OnMissed(missed))
				} else {
					tm, err = h.Every(uint64(arg), period, shardwheel.ByKey(uint64(arg)), shardwheel.OnMissed(missed))
				}
				if period < s.Tick() { // shorter than the tick: it could only miss points
					require.ErrorIs(t, err, shardwheel.ErrBadPeriod)
					continue
				}
				if stopped {
					require.ErrorIs(t, err, shardwheel.ErrStopped)
					continue
				}
				require.NoError(t, err)
				add(tm, uint64(arg), time.Hour).runs = period < time.Hour // live until cancelled or stopped
			case 13: // Slack: any delay, slack up to an hour
				d := delays[arg%len(delays)]
				slack := time.Duration(arg/len(delays)) * time.Hour / 25
				tm, err := s.AfterFunc(d, func() {}, shardwheel.ByKey(uint64(arg)), shardwheel.Slack(slack))
				if stopped {
					require.ErrorIs(t, err, shardwheel.ErrStopped)
					continue
				}
				require.NoError(t, err)
				add(tm, uint64(arg), d)
			case 14: // CancelWait: Cancel's answer, and no error
				tm := pick()
				got, err := tm.tm.CancelWait(context.Background())
				require.NoError(t, err)
				if tm.long {
					require.Equal(t, tm.live, got)
				} else if got {
					require.True(t, tm.open, "CancelWait won for a short timer known to have ended")
				}
				tm.live, tm.open = false, false
			case 11: // Index.Lookup
				key := uint64(arg % 4)
				cur := indexed[key]
				tm, ok := ix.Lookup(key)
				keyedResult(cur, ok)
				if ok {
					require.Equal(t, cur.tm, tm, "Index.Lookup returns the key's indexed timer")
				}
			default: // accessors on any handle
				tm := pick()
				if tm.long {
					require.Equal(t, tm.live, tm.tm.Pending())
					require.Equal(t, tm.live, !tm.tm.Deadline().IsZero())
				} else if tm.tm.Pending() {
					require.True(t, tm.open, "a short timer known to have ended reports pending")
				} else {
					tm.open = false
				}
			}
			live, open := 0, 0
			for _, tm := range timers {
				if tm.live {
					live++
				}
				if tm.open {
					open++
				}
			}
			if !stopped {
				// Short timers may still be pending for a tick or two.
				require.GreaterOrEqual(t, s.Pending(), live)
				require.LessOrEqual(t, s.Pending(), live+open)
			} else {
				require.Zero(t, s.Pending())
			}
		}
	})
}
