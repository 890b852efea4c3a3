package shardwheel_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

func TestMaxPendingSharedAcrossShards(t *testing.T) {
	// The limit is global even though tokens live in shards: one key (so
	// one shard) may use the whole limit.
	s := newScheduler(t, shardwheel.WithShards(4), shardwheel.WithMaxPending(100))
	for range 100 {
		_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(7))
		require.NoError(t, err)
	}
	_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(7))
	assert.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	_, err = s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(8))
	assert.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Equal(t, 100, s.Pending())
}

// TestPendingLimitUnderConcurrency races many producers against a limit:
// the limit is never exceeded, tokens are never lost, and a rejected call
// leaves no trace.
func TestPendingLimitUnderConcurrency(t *testing.T) {
	const limit = 1000
	s := newScheduler(t, shardwheel.WithShards(4), shardwheel.WithMaxPending(limit))
	var accepted, rejected atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 400 {
				tm, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(uint64(w*1000+i)))
				if err != nil {
					rejected.Add(1)
					if !assert.ErrorIs(t, err, shardwheel.ErrTooManyPending) {
						return
					}
					continue
				}
				accepted.Add(1)
				if i%4 == 0 { // some churn: give tokens back while others take
					if !assert.True(t, tm.Cancel()) {
						return
					}
					accepted.Add(-1)
				}
				if !assert.LessOrEqual(t, s.Pending(), limit+8, "Pending may overshoot only by in-flight rejected calls") {
					return
				}
			}
		})
	}
	wg.Wait()
	require.Positive(t, rejected.Load(), "8×400 schedules against a limit of %d: some must be rejected", limit)
	require.LessOrEqual(t, accepted.Load(), int64(limit))
	require.EqualValues(t, accepted.Load(), s.Pending())
	// No token was lost: the remaining room can be filled exactly.
	scheduledBefore := s.Stats().Total.Scheduled
	for s.Pending() < limit {
		_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(uint64(s.Pending())))
		require.NoError(t, err)
	}
	_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(1))
	require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Equal(t, scheduledBefore+uint64(limit)-uint64(accepted.Load()), s.Stats().Total.Scheduled,
		"rejected calls did not reach a shard")
}

// TestRejectionAtTheLimitClearsWhenATokenReturns fills the limit, lets
// rejections mark the scheduler dry, then frees room in each way a timer
// can end: the next AfterFunc, on any shard, is accepted at once.
func TestRejectionAtTheLimitClearsWhenATokenReturns(t *testing.T) {
	const limit = 8
	s := newScheduler(t, shardwheel.WithShards(4), shardwheel.WithMaxPending(limit), shardwheel.WithTick(time.Millisecond))
	var keys []uint64 // two on each shard
	for i := range 4 {
		keys = append(keys, keysFor(s, i, 2)...)
	}
	var handles []shardwheel.Timer
	for _, k := range keys {
		tm, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(k))
		require.NoError(t, err)
		handles = append(handles, tm)
	}
	reject := func() {
		t.Helper()
		for _, k := range keys {
			_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(k))
			require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
		}
	}
	reject()

	// A cancel on shard 0 makes room for a timer on shard 3.
	require.True(t, handles[0].Cancel())
	tm, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(keys[len(keys)-1]))
	require.NoError(t, err, "the returned token is found")
	reject()

	// That timer firing makes room too.
	require.True(t, tm.Reset(0))
	require.Eventually(t, func() bool { return !tm.Pending() }, waitFor, pollEvery)
	require.Eventually(t, func() bool {
		_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(keys[1]))
		return err == nil
	}, waitFor, pollEvery, "a fired timer's token is found")
	reject()
	assert.Equal(t, limit, s.Pending())
}

// TestPendingErrorNamesTheLimit: the rejection at the limit says what the
// limit is, and is still ErrTooManyPending.
func TestPendingErrorNamesTheLimit(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithMaxPending(3))
	for range 3 {
		_, err := s.AfterFunc(time.Hour, func() {})
		require.NoError(t, err)
	}
	_, err := s.AfterFunc(time.Hour, func() {})
	require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Contains(t, err.Error(), "WithMaxPending(3)")
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { _, _ = s.AfterFunc(time.Hour, noop) }),
		"a rejection at the limit allocates nothing")
}

// TestFreedTokenIsFoundAtOnceOnAnyShard: at a limit of one, with the token
// held by a timer on one shard, Schedule and Index.AfterFunc on another are
// rejected without a trace; once the token is free again (the timer
// cancelled; then also a timer that ran, or a keyed one cancelled by key,
// on the first shard) the very next AfterFunc on the other shard succeeds.
func TestFreedTokenIsFoundAtOnceOnAnyShard(t *testing.T) {
	const shards = 4
	s := newScheduler(t, shardwheel.WithShards(shards), shardwheel.WithMaxPending(1))
	ix := shardwheel.NewIndex[uint64](s)
	keys := make([][]uint64, shards)
	for i := range shards {
		keys[i] = keysFor(s, i, 1)
	}
	for round := range 200 {
		from, to := round%shards, (round*3+1)%shards
		tm, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(keys[from][0]))
		require.NoError(t, err, "round %d", round)
		before := s.Stats().Total
		_, err = s.AfterFunc(time.Hour, noop, shardwheel.ByKey(keys[to][0]))
		require.ErrorIs(t, err, shardwheel.ErrTooManyPending, "round %d", round)
		_, err = ix.AfterFunc(keys[to][0], time.Hour, noop)
		require.ErrorIs(t, err, shardwheel.ErrTooManyPending, "round %d", round)
		after := s.Stats().Total
		assert.Equal(t, before.Scheduled, after.Scheduled, "a rejected call left a trace")
		assert.Equal(t, 1, s.Pending())
		switch round % 3 {
		case 0:
			require.True(t, tm.Cancel())
		case 1:
			ran := make(chan struct{})
			require.True(t, tm.Cancel())
			_, err = s.AfterFunc(0, func() { close(ran) }, shardwheel.ByKey(keys[from][0]))
			require.NoError(t, err)
			<-ran // its token is back before its task runs
		case 2:
			require.True(t, tm.Cancel())
			k, err := ix.AfterFunc(keys[from][0], time.Hour, noop)
			require.NoError(t, err)
			require.True(t, ix.Cancel(keys[from][0]))
			require.False(t, k.Pending())
		}
		tm2, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(keys[to][0]))
		require.NoError(t, err, "round %d: a freed token was not found", round)
		require.True(t, tm2.Cancel())
		require.Equal(t, 0, s.Pending())
	}
}

// TestIndexAtTheLimitReplacesNothing: at the WithMaxPending limit a
// Index.AfterFunc that would replace the key's timer is rejected (the new
// timer needs a token before the old one's is freed) and the old timer
// stays pending and indexed.
func TestIndexAtTheLimitReplacesNothing(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithMaxPending(1))
	ix := shardwheel.NewIndex[uint64](s)
	old, err := ix.AfterFunc(1, time.Hour, noop)
	require.NoError(t, err)
	_, err = ix.AfterFunc(1, time.Hour, noop)
	require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.True(t, old.Pending(), "a rejected Index.AfterFunc replaced the old timer")
	got, ok := ix.Lookup(1)
	require.True(t, ok)
	assert.Equal(t, old, got)
}

// TestPendingNeverReadsAboveTheLimit: under a churn at the limit, from
// more goroutines than Ps, Pending read from another goroutine is never
// above WithMaxPending's limit nor below 0 (counting a pair's cancel
// before its schedule read it as far above), and exact once the churn
// stops.
func TestPendingNeverReadsAboveTheLimit(t *testing.T) {
	const limit = 64
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithMaxPending(limit))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pairs atomic.Int64
	for w := range 6 {
		wg.Go(func() {
			held := make([]shardwheel.Timer, 0, limit/6)
			for i := 0; ; i++ {
				select {
				case <-stop:
					for _, tm := range held {
						assert.True(t, tm.Cancel())
					}
					return
				default:
				}
				tm, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(uint64(w)<<32|uint64(i)))
				if err != nil {
					assert.ErrorIs(t, err, shardwheel.ErrTooManyPending)
					continue
				}
				if len(held) < cap(held) {
					held = append(held, tm)
					continue
				}
				assert.True(t, tm.Cancel())
				pairs.Add(1)
			}
		})
	}
	reads, maxRead := 0, 0
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) || pairs.Load() < 10_000; reads++ {
		p := s.Pending()
		maxRead = max(maxRead, p)
		require.GreaterOrEqual(t, p, 0)
		require.LessOrEqual(t, p, limit, "read %d of Pending, %d pairs completed", reads, pairs.Load())
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, s.Pending())
	t.Logf("%d reads, at most %d; %d pairs", reads, maxRead, pairs.Load())
}
