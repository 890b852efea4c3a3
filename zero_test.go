package shardwheel_test

import (
	"context"
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
		"Schedule":           func() { _, _ = s.Schedule(1, time.Second, noop) },
		"AfterFunc":          func() { _, _ = s.AfterFunc(time.Second, noop) },
		"ShardOf":            func() { s.ShardOf(1) },
		"MaxDelay":           func() { s.MaxDelay() },
		"Stop":               func() { s.Stop() },
		"Shutdown":           func() { _, _ = s.Shutdown(context.Background()) },
		"WithTimeout":        func() { s.WithTimeout(context.Background(), time.Second) },
		"WithDeadline, past": func() { s.WithDeadline(context.Background(), time.Now().Add(-time.Second)) },
		"WithTimeoutCause":   func() { s.WithTimeoutCause(context.Background(), time.Second, nil) },
		"WithDeadlineCause":  func() { s.WithDeadlineCause(context.Background(), time.Now(), nil) },
	}
	for name, call := range tests {
		assert.PanicsWithValue(t, msg, call, name)
	}
	// Read-only accessors report an empty scheduler.
	assert.Zero(t, s.Shards())
	assert.Zero(t, s.Pending())
	assert.Empty(t, s.Stats().Shards)
}
