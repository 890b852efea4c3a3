package shardwheel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

func TestZeroTimeoutIsInert(t *testing.T) {
	var tm shardwheel.Timeout
	assert.False(t, tm.Cancel())
	assert.False(t, tm.Reset(time.Second))
	assert.False(t, tm.Pending())
	assert.Zero(t, tm.Key())
	assert.True(t, tm.Deadline().IsZero())
}

func TestTimeoutAccessors(t *testing.T) {
	s := newScheduler(t)
	before := time.Now()
	tm, err := s.Schedule(42, time.Minute, func() {})
	require.NoError(t, err)
	assert.Equal(t, uint64(42), tm.Key())
	assert.True(t, tm.Pending())
	dl := tm.Deadline()
	assert.False(t, dl.Before(before.Add(time.Minute)), "deadline %v is early", dl)
	assert.True(t, dl.Before(time.Now().Add(time.Minute+2*s.Tick())), "deadline %v too late", dl)
	require.True(t, tm.Reset(2*time.Minute))
	assert.True(t, tm.Deadline().After(dl.Add(59*time.Second)))
	require.True(t, tm.Cancel())
	assert.True(t, tm.Deadline().IsZero())
	assert.Equal(t, uint64(42), tm.Key(), "the key outlives the timer")
}
