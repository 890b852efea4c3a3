package shardwheel_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

// TestStatsAccountForEveryEnd ends timers in each of the three ways and
// checks that the counters agree with what happened, per shard and in
// total.
func TestStatsAccountForEveryEnd(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(3), shardwheel.WithTick(time.Millisecond))
	const n = 300 // key%3: 0 runs at once, 1 is cancelled, 2 is left for Stop
	var ran atomic.Int64
	perShard := make([]uint64, s.Shards())
	for k := range uint64(n) {
		delay, task := time.Hour, noop
		if k%3 == 0 {
			delay, task = 0, func() { ran.Add(1) }
		}
		tm, err := s.AfterFunc(delay, task, shardwheel.ByKey(k))
		require.NoError(t, err)
		perShard[shardwheel.FiledOn(tm)]++ // the shard that filed it counts it
		if k%3 == 1 {
			require.True(t, tm.Cancel())
		}
	}
	st := s.Stats()
	assert.EqualValues(t, n, st.Total.Scheduled)
	for i, sh := range st.Shards {
		assert.Equal(t, perShard[i], sh.Scheduled, "shard %d", i)
	}

	// A shard publishes what its goroutine counts once per pass; wait
	// until the short timers have run.
	require.Eventually(t, func() bool {
		st := s.Stats()
		return ran.Load() == n/3 && st.Total.Fired >= n/3 && st.Total.Cancelled >= n/3 && st.Pending == n/3
	}, waitFor, pollEvery)
	st = s.Stats()
	assert.EqualValues(t, n/3, st.Total.Fired)
	assert.EqualValues(t, n/3, st.Total.Cancelled)
	// The cancelled timers' nodes stay in the wheel (a Cancel only marks
	// them) until their slot comes round or a sweep passes: too few here
	// to start one.
	// A crossed timer's proxy on its key's shard is freed by that shard's
	// goroutine, after the run: it settles.
	settles(t, s, "only the timers left for Stop are live", func(st stats.Shard) bool {
		return st.Resident-st.HeldCancelled == n/3
	})
	st = s.Stats()
	assert.LessOrEqual(t, st.Total.HeldCancelled, n/3)
	assert.Equal(t, s.Pending(), st.Pending)
	assert.Zero(t, st.Total.Stopped)

	require.Len(t, s.Stop(), n/3)
	st = s.Stats()
	assert.EqualValues(t, n/3, st.Total.Stopped)
	assert.Zero(t, st.Pending)
	var fired, cancelled, stopped uint64
	for _, sh := range st.Shards {
		fired += sh.Fired
		cancelled += sh.Cancelled
		stopped += sh.Stopped
	}
	assert.Equal(t, st.Total.Fired, fired)
	assert.Equal(t, st.Total.Cancelled, cancelled)
	assert.Equal(t, st.Total.Stopped, stopped)
}

// TestStatsAddUp checks Scheduled = Fired + Cancelled + Stopped + pending
// at quiescence and after Stop, with timers filed by tasks, cancels just
// before Stop, and Schedules that lose the race with Stop.
func TestStatsAddUp(t *testing.T) {
	s := newUnstopped(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	addsUp := func(what string) {
		t.Helper()
		st := s.Stats()
		tot := st.Total
		assert.Equal(t, tot.Scheduled, tot.Fired+tot.Cancelled+tot.Stopped+uint64(st.Pending), "%s: %+v", what, tot)
	}
	var fired atomic.Int64
	for i := range 100 {
		_, err := s.AfterFunc(0, func() {
			fired.Add(1)
			_, _ = s.AfterFunc(time.Millisecond, func() { fired.Add(1) }, shardwheel.ByKey(uint64(i)))
		}, shardwheel.ByKey(uint64(i)))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return fired.Load() == 200 }, waitFor, pollEvery)
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == 200 }, waitFor, pollEvery)
	addsUp("quiescent")

	var later []shardwheel.Timer
	for i := range 50 {
		tm, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(uint64(i)))
		require.NoError(t, err)
		later = append(later, tm)
	}
	for _, tm := range later[:20] {
		require.True(t, tm.Cancel())
	}
	// Producers race Stop; every call they make either succeeds or leaves
	// no trace.
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for p := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				if _, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(uint64(p)<<32|uint64(i))); err != nil {
					assert.ErrorIs(t, err, shardwheel.ErrStopped)
					return
				}
				accepted.Add(1)
			}
		})
	}
	require.Eventually(t, func() bool { return accepted.Load() > 1000 }, waitFor, pollEvery)
	stopped := s.Stop()
	wg.Wait()
	assert.Len(t, stopped, 30+int(accepted.Load()))
	addsUp("after Stop")
	st := s.Stats().Total
	assert.EqualValues(t, 200+50+accepted.Load(), st.Scheduled)
	assert.EqualValues(t, len(stopped), st.Stopped)
}

// TestPassTimeAndSlowestPassAcrossShards: PassTime records each pass,
// SlowestPass is the longest one and says what it did and when, and Recent
// the same pass while it is within the last minute; a slow task holds no
// pass (it runs on the shard's runner); Total adds up the shards (counts
// sum, peaks take the maximum); with Stats off no pass is timed and the
// counters are still kept.
func TestPassTimeAndSlowestPassAcrossShards(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	began := time.Now()
	var wg sync.WaitGroup
	for i := range 2000 {
		wg.Add(1)
		_, err := s.AfterFunc(time.Duration(i%50)*time.Millisecond, wg.Done, shardwheel.ByKey(uint64(i)))
		require.NoError(t, err)
	}
	wg.Add(1)
	_, err := s.AfterFunc(5*time.Millisecond, func() { time.Sleep(40 * time.Millisecond); wg.Done() }, shardwheel.ByKey(1<<20))
	require.NoError(t, err)
	wg.Wait()
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == 2001 }, waitFor, pollEvery)
	st := s.Stats()
	require.Positive(t, st.Total.PassTime.Count())
	sp := st.Total.SlowestPass
	// the slowest pass is the largest recorded pass time (histogram error < 1/64)
	assert.InEpsilon(t, float64(st.Total.PassTime.Max()), float64(sp.Duration), 1.0/32)
	// The slowest pass may be one that only swept or slept on the CPU:
	// no task runs in a pass, so no pass is slow for its tasks.
	assert.LessOrEqual(t, sp.Ago, time.Since(began), "it ended within the test")
	assert.Equal(t, sp, st.Total.Recent.SlowestPass, "within the last minute")
	assert.GreaterOrEqual(t, st.Total.QueuedPeak, st.Total.Recent.QueuedPeak)
	var fired uint64
	maxPeak := 0
	for _, sh := range st.Shards {
		fired += sh.Fired
		maxPeak = max(maxPeak, sh.RefiledPeak)
		assert.LessOrEqual(t, sh.SlowestPass.Duration, sp.Duration)
	}
	assert.Equal(t, fired, st.Total.Fired)
	assert.Equal(t, maxPeak, st.Total.RefiledPeak)
	assert.EqualValues(t, 2001, st.Total.Fired)

	off := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithStats(false))
	done := make(chan struct{})
	_, err = off.AfterFunc(0, func() { close(done) }, shardwheel.ByKey(1))
	require.NoError(t, err)
	<-done
	require.Eventually(t, func() bool { return off.Stats().Total.Fired == 1 }, waitFor, pollEvery)
	ost := off.Stats().Total
	assert.Zero(t, ost.SlowestPass.Duration)
	assert.Zero(t, ost.PassTime.Count())
	assert.EqualValues(t, 1, ost.Fired)
}

// TestStatsAddUpWithContextsHandedOverByStop: Pending counts the timers
// that have not ended, contexts' included, and after Stop Scheduled =
// Fired + Cancelled + Stopped + Pending, the contexts' timers Stop handed
// over counted as stopped and replaced keyed timers as cancelled.
func TestStatsAddUpWithContextsHandedOverByStop(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	ix := shardwheel.NewIndex[uint64](s)
	ran := make(chan struct{})
	_, err := s.AfterFunc(0, func() { close(ran) }, shardwheel.ByKey(1))
	require.NoError(t, err)
	<-ran
	c, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(2))
	require.NoError(t, err)
	require.True(t, c.Cancel())
	_, err = ix.AfterFunc(3, time.Hour, noop)
	require.NoError(t, err)
	_, err = ix.AfterFunc(3, time.Hour, noop) // replaces: one cancelled
	require.NoError(t, err)
	_, cancel := s.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, cancel2 := s.WithTimeout(context.Background(), time.Hour)
	cancel2()
	assert.Equal(t, 2, s.Pending())
	out := s.Stop()
	assert.Len(t, out, 1)
	assert.Equal(t, 0, s.Pending())
	st := s.Stats()
	tot := st.Total
	assert.EqualValues(t, 6, tot.Scheduled)
	assert.EqualValues(t, 1, tot.Fired)
	assert.EqualValues(t, 3, tot.Cancelled)
	assert.EqualValues(t, 2, tot.Stopped)
	assert.Equal(t, tot.Scheduled, tot.Fired+tot.Cancelled+tot.Stopped+uint64(st.Pending))
}

// TestHeldCancelledIsNeverAboveResident: HeldCancelled and Resident come
// from the same pass, so a reader never sees more cancelled timers held
// than timers held, however many Cancels came since the shard's last pass.
func TestHeldCancelledIsNeverAboveResident(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	ts := make([]shardwheel.Timer, 5000)
	for range 20 {
		for i := range ts {
			var err error
			ts[i], err = s.AfterFunc(time.Hour, func() {})
			require.NoError(t, err)
		}
		for _, tm := range ts {
			require.True(t, tm.Cancel())
		}
		st := s.Stats().Total
		require.LessOrEqual(t, st.HeldCancelled, st.Resident)
		require.GreaterOrEqual(t, st.HeldCancelled, 0)
	}
}

// TestStatsRelationsHoldInEveryRead reads Stats in a loop beside a keyed
// churn (timers crossing between shards, cancelled, reset, some run, a
// small transfer cap backlogging the queues) and checks, in every read,
// every relation between fields that stats.Shard documents: no cancelled
// node held beyond the nodes held, no recent peak above its peak since
// the start, no more taken back than cancelled, no counter going back.
func TestStatsRelationsHoldInEveryRead(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTransferCap(8))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			var ts []shardwheel.Timer
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := time.Duration(r.IntN(40)) * time.Millisecond
				tm, err := s.AfterFunc(d, noop, shardwheel.ByKey(r.Uint64()))
				if !assert.NoError(t, err) {
					return
				}
				ts = append(ts, tm)
				if len(ts) > 64 {
					i := r.IntN(len(ts))
					if r.IntN(4) == 0 {
						ts[i].Reset(time.Hour)
					}
					ts[i].Cancel()
					ts[i] = ts[len(ts)-1]
					ts = ts[:len(ts)-1]
				}
			}
		})
	}
	reads := 2000
	if testing.Short() {
		reads = 300
	}
	var last map[string]uint64
	for i := range reads {
		st := s.Stats()
		var sum stats.Shard
		for _, sh := range append(st.Shards, st.Total) {
			require.LessOrEqual(t, sh.HeldCancelled, sh.Resident, "read %d: HeldCancelled above Resident", i)
			require.LessOrEqual(t, sh.Recent.QueuedPeak, sh.QueuedPeak, "read %d: recent QueuedPeak", i)
			require.LessOrEqual(t, sh.Recent.TransferPeak, sh.TransferPeak, "read %d: recent TransferPeak", i)
			require.LessOrEqual(t, sh.Recent.RefiledPeak, sh.RefiledPeak, "read %d: recent RefiledPeak", i)
			require.LessOrEqual(t, sh.Recent.SlowestPass.Duration, sh.SlowestPass.Duration, "read %d: recent SlowestPass", i)
			require.LessOrEqual(t, sh.TakenBack, sh.Cancelled, "read %d: TakenBack above Cancelled", i)
		}
		for _, sh := range st.Shards {
			sum.Resident += sh.Resident
			sum.HeldCancelled += sh.HeldCancelled
		}
		require.Equal(t, sum.Resident, st.Total.Resident, "read %d: Total.Resident is the shards' sum", i)
		require.Equal(t, sum.HeldCancelled, st.Total.HeldCancelled, "read %d", i)
		now := counters(st.Total)
		for name, v := range now {
			require.GreaterOrEqual(t, v, last[name], "read %d: %s went backwards", i, name)
		}
		last = now
		if i%16 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
}

// TestCancelledCrossedTimersAreFreed: timers with a key of another shard
// cross to it as they are scheduled (due within the wheel's first level),
// are pushed an hour back by Reset, then cancelled: the filing shard and
// the key's shard free them at once, not at the hour, and then, with
// nothing pending, their goroutines sleep (no wake-up but a Stats read's,
// once the give-back of the spike's storage is done).
func TestCancelledCrossedTimersAreFreed(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := newScheduler(t, shardwheel.WithShards(2))
	n := 60_000
	if raceEnabled || testing.Short() {
		n = 6_000
	}
	ts := make([]shardwheel.Timer, 0, n)
	for k := uint64(0); len(ts) < n; k++ {
		if s.ShardOf(k) != 1 { // GOMAXPROCS 1: files on shard 0, crosses to 1
			continue
		}
		tm, err := s.AfterFunc(300*time.Millisecond, func() { t.Error("a cancelled timer ran") }, shardwheel.ByKey(k))
		require.NoError(t, err)
		require.True(t, tm.Reset(time.Hour))
		ts = append(ts, tm)
	}
	// Crossed is a holder's count, published by a pass, which a Stats read
	// asks an idle shard goroutine for: poll it.
	require.Eventually(t, func() bool { return s.Stats().Total.Crossed > 0 }, waitFor, pollEvery, "the timers crossed")
	for _, tm := range ts {
		require.True(t, tm.Cancel())
	}
	require.Zero(t, s.Pending())
	require.Eventually(t, func() bool {
		st := s.Stats().Total
		return st.HeldCancelled == 0 && st.Resident == 0
	}, waitFor, pollEvery, "the cancelled timers are freed: %+v", s.Stats().Total)
	// Idle: a window in which each goroutine woke only for the two Stats
	// reads around it (a read wakes a sleeping goroutine to publish).
	require.Eventually(t, func() bool {
		before := s.Stats()
		time.Sleep(300 * time.Millisecond)
		after := s.Stats()
		for i := range after.Shards {
			if after.Shards[i].Wakeups-before.Shards[i].Wakeups > 2 {
				return false
			}
		}
		return true
	}, waitFor, pollEvery, "a shard with nothing pending sleeps")
}
