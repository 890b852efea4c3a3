package shardwheel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// TestSynctestBubble: a Scheduler created inside a testing/synctest bubble
// runs on the bubble's fake clock, so a test of a 30s request timeout
// takes no real time; its shard goroutines block durably (synctest.Wait
// returns while they sleep or park) and exit on Stop (synctest.Test fails
// if a goroutine of the bubble is left).
func TestSynctestBubble(t *testing.T) {
	for _, affinity := range []bool{false, true} {
		realStart := time.Now()
		synctest.Test(t, func(t *testing.T) {
			s, err := shardwheel.New(shardwheel.WithShards(2), shardwheel.WithAffinity(affinity))
			require.NoError(t, err)
			start := time.Now()
			ctx, cancel := s.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ran := make(chan time.Duration, 1)
			_, err = s.AfterFunc(time.Hour, func() { ran <- time.Since(start) })
			require.NoError(t, err)

			synctest.Wait() // every goroutine of the bubble durably blocked: the shards sleep
			assert.Nil(t, ctx.Err())
			assert.Equal(t, 2, s.Pending())

			<-ctx.Done()
			took := time.Since(start)
			assert.Equal(t, context.DeadlineExceeded, ctx.Err())
			assert.GreaterOrEqual(t, took, 30*time.Second)
			assert.Less(t, took, 30*time.Second+2*s.Tick())

			took = <-ran
			assert.GreaterOrEqual(t, took, time.Hour)
			assert.Less(t, took, time.Hour+2*s.Tick())

			// A context that outlives Stop expires on the bubble's clock too.
			lateStart := time.Now()
			late, cancelLate := s.WithTimeout(context.Background(), 10*time.Second)
			defer cancelLate()
			assert.Empty(t, s.Stop())
			<-late.Done()
			assert.GreaterOrEqual(t, time.Since(lateStart), 10*time.Second)
			assert.Equal(t, context.DeadlineExceeded, late.Err())
		})
		// On a real clock the bubble would take over an hour; the bound
		// leaves a busy host room.
		assert.Less(t, time.Since(realStart), 30*time.Second, "affinity=%v: the bubble's time is fake", affinity)
	}
}
