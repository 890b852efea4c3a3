package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// null answers as a real implementation's common path does, and no task
// given to it runs: it has no goroutine to run one, and nothing it returns
// leads back to one.
func TestNullAnswers(t *testing.T) {
	var n null
	ran := func() { t.Error("a task given to null ran") }
	h, err := n.Schedule(42, 0, ran)
	assert.NoError(t, err)
	assert.EqualValues(t, 42, h, "the handle is the key")
	assert.True(t, n.Cancel(h), "pending, as when the response comes first")
	h, ok := n.Reset(h, 42, 0, ran)
	assert.True(t, ok, "pending, as for a connection read within its idle timeout")
	assert.EqualValues(t, 42, h)
	n.Close(func(func(uint64) bool) { t.Error("Close has nothing to look at") })
}

// The load runs the same calls through null as through an implementation
// whose timers have not fired yet, and none of its tasks ever runs.
func TestNullLoadRunsTheSameCalls(t *testing.T) {
	l := testLoad()
	f := &fakeTimers{tasks: map[int]func(){}}
	fake := newWorker[int](f, clock{base: time.Now()}, 0, l)
	alone := newWorker[uint64](null{}, clock{base: time.Now()}, 0, l)
	fake.prefill(context.Background())
	alone.prefill(context.Background())
	for ms := int64(1); ms <= 1100; ms++ {
		at := ms * int64(time.Millisecond)
		fake.batch(at, at)
		alone.batch(at, at)
	}
	want := fake.n.read()
	got := alone.n.read()
	assert.Positive(t, want.Cancels)
	assert.Positive(t, want.Resets)
	assert.Equal(t, want, got, "same calls with the same outcomes")
	assert.Zero(t, got.Fired)
	assert.Zero(t, got.Missed)
	assert.Zero(t, got.Reopened)
	assert.Zero(t, alone.lateness().Count(), "no task ran")
}
