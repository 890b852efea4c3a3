package shardwheel_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// TestSlackOptionWindows: on the bubble's fake clock (no tick lag),
// timers with slack (closures with and without a key, Handlers') run
// within [delay, delay+slack] and exact timers at their deadline's tick,
// on a mix of both; the timers with slack share few ticks.
func TestSlackOptionWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := shardwheel.New(shardwheel.WithShards(2))
		require.NoError(t, err)
		defer s.Stop()
		var tasks sync.Map // the Handler's argument -> the task
		h, err := s.NewHandler(func(arg uint64) {
			task, _ := tasks.Load(arg)
			task.(func())()
		})
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(3, 4))
		tick := s.Tick()
		var mu sync.Mutex
		slackTicks := map[time.Duration]bool{}
		var wg sync.WaitGroup
		for i := range 3000 {
			start := time.Now()
			delay := time.Duration(r.Int64N(int64(5 * time.Second)))
			slack := time.Duration(r.Int64N(int64(2 * time.Second)))
			exact := i%2 == 0
			wg.Add(1)
			task := func() {
				defer wg.Done()
				took := time.Since(start)
				assert.GreaterOrEqual(t, took, delay, "early")
				if exact {
					assert.Less(t, took, delay+tick, "an exact timer runs at its deadline's tick")
					return
				}
				assert.LessOrEqual(t, took, max(delay+slack, (delay+tick-1)/tick*tick), "past its slack")
				mu.Lock()
				slackTicks[time.Since(time.Time{})] = true
				mu.Unlock()
			}
			// Exact timers, and timers with slack of every form: a
			// closure with and without a key, a Handler's.
			switch i % 6 {
			case 0, 2, 4:
				_, err = s.AfterFunc(delay, task, shardwheel.ByKey(uint64(i)))
			case 1:
				_, err = s.AfterFunc(delay, task, shardwheel.ByKey(uint64(i)), shardwheel.Slack(slack))
			case 3:
				_, err = s.AfterFunc(delay, task, shardwheel.Slack(slack))
			default:
				tasks.Store(uint64(i), task)
				_, err = h.AfterFunc(uint64(i), delay, shardwheel.ByKey(uint64(i)), shardwheel.Slack(slack))
			}
			require.NoError(t, err)
			if i%100 == 0 {
				time.Sleep(time.Duration(r.Int64N(int64(50 * time.Millisecond))))
			}
		}
		wg.Wait()
		t.Logf("1500 timers with slack ran on %d distinct ticks", len(slackTicks))
		assert.Less(t, len(slackTicks), 300)
		_, err = (shardwheel.Handler{}).AfterFunc(1, time.Second, shardwheel.ByKey(1), shardwheel.Slack(time.Second))
		assert.ErrorIs(t, err, shardwheel.ErrNilTask)
		_, err = s.AfterFunc(time.Second, nil, shardwheel.ByKey(1), shardwheel.Slack(time.Second))
		assert.ErrorIs(t, err, shardwheel.ErrNilTask)
	})
}

// TestSlackOptionSkipsTheCascade: a minute-long timer with a second of
// slack is filed where it runs without moving down the wheel: no Refiled,
// where the exact one cascades.
func TestSlackOptionSkipsTheCascade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, slack := range []time.Duration{0, time.Second} {
			s, err := shardwheel.New(shardwheel.WithShards(1))
			require.NoError(t, err)
			done := make(chan struct{})
			_, err = s.AfterFunc(time.Minute, func() { close(done) }, shardwheel.ByKey(1), shardwheel.Slack(slack))
			require.NoError(t, err)
			<-done
			st := s.Stats().Total
			if slack == 0 {
				assert.NotZero(t, st.Refiled)
			} else {
				assert.Zero(t, st.Refiled)
			}
			s.Stop()
		}
	})
}
