package shardwheel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel"
)

// TestZeroSchedulerSaysUseNew: a Scheduler not made by New is misuse, and
// the panic says so instead of an index out of range.
func TestZeroSchedulerSaysUseNew(t *testing.T) {
	const msg = "shardwheel: use New to create a Scheduler"
	var s shardwheel.Scheduler
	tests := map[string]func(){
		"Schedule":  func() { _, _ = s.Schedule(1, time.Second, noop) },
		"AfterFunc": func() { _, _ = s.AfterFunc(time.Second, noop) },
		"ShardOf":   func() { s.ShardOf(1) },
		"MaxDelay":  func() { s.MaxDelay() },
		"Stop":      func() { s.Stop() },
	}
	for name, call := range tests {
		assert.PanicsWithValue(t, msg, call, name)
	}
	// Read-only accessors report an empty scheduler.
	assert.Zero(t, s.Shards())
	assert.Zero(t, s.Pending())
	assert.Empty(t, s.Stats().Shards)
}
