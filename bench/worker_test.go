package main

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/hist"
)

// fakeTimers is an implementation that never fires on its own: the test
// fires timers by hand. Handles are ids; 0 is no timer.
type fakeTimers struct {
	next       int
	tasks      map[int]func() // pending timers
	onSchedule func()         // if set, called at the start of Schedule
}

func (f *fakeTimers) Schedule(_ uint64, _ time.Duration, fn func()) (int, error) {
	if f.onSchedule != nil {
		f.onSchedule()
	}
	f.next++
	f.tasks[f.next] = fn
	return f.next, nil
}

func (f *fakeTimers) Cancel(h int) bool {
	_, ok := f.tasks[h]
	delete(f.tasks, h)
	return ok
}

// Reset re-arms a timer that ran, as AfterFunc's Reset does.
func (f *fakeTimers) Reset(h int, _ uint64, _ time.Duration, fn func()) (int, bool) {
	_, ok := f.tasks[h]
	f.tasks[h] = fn
	return h, ok
}

func (f *fakeTimers) Close(live iter.Seq[int]) {
	for h := range live {
		delete(f.tasks, h)
	}
}

// fire runs timer h's task, as the implementation would at its deadline.
func (f *fakeTimers) fire(h int) {
	fn := f.tasks[h]
	delete(f.tasks, h)
	fn()
}

func testLoad() Load {
	return Load{
		Rate: 1000, Resident: 1000, Cancel: 0.8,
		DelayMin: time.Second, DelayMax: 2 * time.Second,
		RespMin: time.Millisecond, RespMax: 50 * time.Millisecond,
		Conns: 10, Idle: time.Second, ResetRate: 100,
		Workers: 1, Seed: 1,
	}
}

// drive runs w's batches, one per millisecond, from ms from to ms to.
func driveWorker(w *worker[int], from, to int64) {
	for ms := from; ms <= to; ms++ {
		t := ms * int64(time.Millisecond)
		w.batch(t, t)
	}
}

func TestWorkerLoadShape(t *testing.T) {
	f := &fakeTimers{tasks: map[int]func(){}}
	l := testLoad()
	w := newWorker[int](f, clock{base: time.Now()}, 0, l)
	w.prefill(context.Background())
	p := l.population()
	assert.Equal(t, p.streaming+p.background+p.conns, len(f.tasks), "prefill is the steady state less the in-flight requests")
	assert.Positive(t, p.background)

	driveWorker(w, 1, 1100)
	ops := w.n.read()
	assert.EqualValues(t, 1100, ops.Requests, "open loop: exactly the offered rate")
	assert.EqualValues(t, 110, ops.Resets)
	assert.InDelta(t, 0.8*1100, float64(ops.Cancels), 0.8*1100*0.1, "cancelled share")
	assert.Zero(t, ops.Missed)
	assert.Zero(t, ops.Errors)
	assert.EqualValues(t, len(f.tasks), ops.pending(), "the counts account for every pending timer")

	// Every request due to time out does; background ones are re-issued.
	slots := len(w.slots)
	var background int
	for s, h := range w.slots {
		if _, ok := f.tasks[h]; ok {
			if w.kinds[s] == kindBackground {
				background++
			}
			f.fire(h)
		}
	}
	f.fire(w.conns[3])
	before := ops.Schedules
	driveWorker(w, 1101, 1101)
	ops = w.n.read()
	assert.EqualValues(t, background, ops.Schedules-before-1, "re-issued: the background requests and one new request")
	assert.Equal(t, slots, len(w.slots), "freed slots are reused")
	assert.EqualValues(t, len(f.tasks), ops.pending())
	assert.Equal(t, p.background, len(w.slots)-len(w.free)-countKind(w, kindStream))

	// A read of the closed connection reopens it.
	for w.c.Reopened == 0 && w.c.Resets < 10_000 {
		w.read()
	}
	w.n.publish(w.c)
	ops = w.n.read()
	assert.EqualValues(t, 1, ops.Reopened)
	assert.EqualValues(t, len(f.tasks), ops.pending())

	f.Close(w.live())
	assert.Empty(t, f.tasks, "Close reaches every timer the load holds")
}

// The progress line reads the counts while prefill runs: they must grow
// with it, not jump from 0 at its end.
func TestWorkerPrefillPublishesAsItGoes(t *testing.T) {
	f := &fakeTimers{tasks: map[int]func(){}}
	l := testLoad()
	l.Resident, l.Conns = 3*prefillChunk, 0
	w := newWorker[int](f, clock{base: time.Now()}, 0, l)
	var seen []int64 // the published Schedules before each call
	f.onSchedule = func() { seen = append(seen, w.n.read().Schedules) }
	w.prefill(context.Background())
	require.Greater(t, len(seen), 2*prefillChunk)
	assert.Zero(t, seen[prefillChunk-1])
	assert.EqualValues(t, prefillChunk, seen[prefillChunk])
	assert.EqualValues(t, 2*prefillChunk, seen[2*prefillChunk])
	assert.EqualValues(t, len(f.tasks), w.n.read().Schedules, "all published at the end")
}

func countKind(w *worker[int], kind uint8) int {
	var n int
	for s, h := range w.slots {
		if h != 0 && w.kinds[s] == kind {
			n++
		}
	}
	return n
}

func TestWorkerFallsBehind(t *testing.T) {
	f := &fakeTimers{tasks: map[int]func(){}}
	l := testLoad()
	w := newWorker[int](f, clock{base: time.Now()}, 0, l)
	// One batch two seconds in: it issues at most maxBatch's worth and
	// records how far behind it is.
	w.batch(int64(2*time.Second), int64(2*time.Second))
	ops := w.n.read()
	assert.EqualValues(t, int64(l.Rate*maxBatch.Seconds())+1, ops.Requests)
	assert.InDelta(t, 2*time.Second, time.Duration(w.n.backlog.Load()), float64(time.Millisecond))
}

func TestWorkerLatenessRecording(t *testing.T) {
	f := &fakeTimers{tasks: map[int]func(){}}
	w := newWorker[int](f, clock{base: time.Now()}, 0, testLoad())
	deadline := w.clock.now() - int64(5*time.Millisecond)
	w.timedOut(-1, deadline)
	// 5ms late, plus however long the call took to read the clock (a
	// descheduled goroutine may take milliseconds), within the
	// histogram's error.
	took := time.Duration(w.clock.now() - deadline)
	assert.EqualValues(t, 1, w.peekLateness().Count())
	s := w.lateness()
	require.EqualValues(t, 1, s.Count())
	late := time.Duration(s.Quantile(0.5))
	assert.GreaterOrEqual(t, float64(late), float64(5*time.Millisecond)*(1-hist.RelativeError))
	assert.LessOrEqual(t, float64(late), float64(took)*(1+hist.RelativeError))
	assert.Zero(t, w.lateness().Count(), "lateness restarts the recording")
}
