package shardwheel_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// TestChurnSoak runs random AfterFunc, Cancel, Reset and natural expiry from
// many goroutines for a bounded time (SHARDWHEEL_SOAK, default 2s, or 60s
// in CI) with an oracle that knows each timer's fate; a lost, duplicated,
// early or stuck timer fails with that timer's history.
func TestChurnSoak(t *testing.T) {
	d := soakDuration(t)
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond), shardwheel.WithInitialCapacity(256))
	o := newOracle()
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() { o.churn(t, s, uint64(w), deadline) })
	}
	wg.Wait()
	// The short timers (delays under 30ms) all run; what is left is due
	// about an hour after it was scheduled (so this needs a soak shorter
	// than 59 minutes), and Stop returns exactly that.
	horizon := o.now() + int64(time.Minute)
	require.Eventually(t, func() bool { return o.dueBy(horizon) == 0 }, waitFor, pollEvery,
		"timers past their deadline did not run")
	want := o.pending()
	stopped := s.Stop()
	require.Len(t, stopped, want, "Stop returns the pending timers, no more, no less")
	o.finish(t, stopped)
	require.Zero(t, s.Pending())
	t.Logf("soak %v: %d timers, %d ran, %d cancelled, %d stopped, %d resets",
		d, o.created.Load(), o.ran.Load(), o.cancelled.Load(), o.stopped.Load(), o.resets.Load())
}

// soakDuration reads SHARDWHEEL_SOAK (a Go duration) for long local runs.
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("SHARDWHEEL_SOAK")
	if v == "" {
		if testing.Short() {
			return 500 * time.Millisecond
		}
		return 2 * time.Second
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "SHARDWHEEL_SOAK")
	return d
}

// Timer fates in the oracle.
const (
	fatePending = iota
	fateRan
	fateCancelled
	fateStopped
)

// record is the oracle's view of one timer.
type record struct {
	tm    shardwheel.Timer
	due   atomic.Int64 // earliest allowed run, ns since the oracle's epoch
	fate  atomic.Int32
	runs  atomic.Int32
	mu    sync.Mutex
	story []string // what happened to it, for failure messages
}

func (r *record) log(format string, args ...any) {
	r.mu.Lock()
	r.story = append(r.story, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *record) history() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.story, "; ")
}

// oracle tracks every timer of a soak and checks each end as it happens.
type oracle struct {
	epoch                                    time.Time
	created, ran, cancelled, stopped, resets atomic.Int64
	// live maps handles to records of timers not known to have ended. A
	// task may end its timer before AfterFunc has returned the handle, so
	// an entry may outlive its timer; finish skips those. (No lock is held
	// across AfterFunc: a task blocked on it would stall the shard that
	// AfterFunc may be waiting for.)
	live sync.Map
}

func newOracle() *oracle { return &oracle{epoch: time.Now()} }

func (o *oracle) now() int64 { return int64(time.Since(o.epoch)) }

// end moves r to fate, failing if it had already ended.
func (o *oracle) end(t *testing.T, r *record, fate int32, how string) {
	if !r.fate.CompareAndSwap(fatePending, fate) {
		t.Errorf("timer ended twice (%s after fate %d): %s", how, r.fate.Load(), r.history())
		return
	}
	r.mu.Lock() // r.tm is set by the producer after AfterFunc returns
	tm := r.tm
	r.mu.Unlock()
	o.live.Delete(tm)
}

func (o *oracle) task(t *testing.T, r *record) func() {
	return func() {
		at := o.now()
		r.log("ran at %v", time.Duration(at))
		if r.runs.Add(1) > 1 {
			t.Errorf("timer ran twice: %s", r.history())
		}
		if due := r.due.Load(); at < due {
			t.Errorf("timer ran %v early: %s", time.Duration(due-at), r.history())
		}
		o.ran.Add(1)
		o.end(t, r, fateRan, "ran")
	}
}

// churn runs one goroutine's random operations until deadline.
func (o *oracle) churn(t *testing.T, s *shardwheel.Scheduler, seed uint64, deadline time.Time) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var window []*record // this goroutine's recent timers, ended or not
	delay := func() time.Duration { return time.Duration(rng.IntN(30_000)) * time.Microsecond }
	for i := 0; time.Now().Before(deadline); i++ {
		switch op := rng.IntN(10); {
		case op < 4 || len(window) == 0:
			r := &record{}
			d := delay()
			if rng.IntN(50) == 0 {
				d = time.Hour // left for Stop to return
			}
			r.due.Store(o.now() + int64(d))
			r.log("schedule %v at %v", d, time.Duration(o.now()))
			tm, err := s.AfterFunc(d, o.task(t, r), shardwheel.ByKey(rng.Uint64()))
			if !assert.NoError(t, err) {
				return
			}
			r.mu.Lock()
			r.tm = tm
			r.mu.Unlock()
			if r.fate.Load() == fatePending {
				o.live.Store(tm, r)
			}
			o.created.Add(1)
			if len(window) < 512 {
				window = append(window, r)
			} else {
				window[rng.IntN(len(window))] = r
			}
		case op < 7:
			r := window[rng.IntN(len(window))]
			ended := r.fate.Load() != fatePending
			if r.tm.Cancel() {
				r.log("cancel true")
				if ended {
					t.Errorf("Cancel returned true for an ended timer: %s", r.history())
				}
				o.cancelled.Add(1)
				o.end(t, r, fateCancelled, "cancel")
			}
		default:
			r := window[rng.IntN(len(window))]
			d := delay()
			due := o.now() + int64(d)
			prev := r.due.Load()
			r.due.Store(min(prev, due)) // conservative while the outcome is open
			ok := r.tm.Reset(d)
			r.log("reset %v at %v: %v", d, time.Duration(due-int64(d)), ok)
			if ok {
				r.due.Store(due)
				o.resets.Add(1)
			} else {
				r.due.Store(prev)
			}
		}
	}
}

// dueBy returns the number of timers not known to have ended that may run
// at or before at (ns since the epoch).
func (o *oracle) dueBy(at int64) int {
	n := 0
	o.live.Range(func(_, v any) bool {
		if r := v.(*record); r.fate.Load() == fatePending && r.due.Load() <= at {
			n++
		}
		return true
	})
	return n
}

// pending returns the number of timers not known to have ended.
func (o *oracle) pending() int {
	n := 0
	o.live.Range(func(_, v any) bool {
		if v.(*record).fate.Load() == fatePending {
			n++
		}
		return true
	})
	return n
}

// finish accounts for the timers Stop returned and fails for any timer that
// never ended.
func (o *oracle) finish(t *testing.T, stopped []shardwheel.Timer) {
	for _, tm := range stopped {
		v, ok := o.live.Load(tm)
		if !ok {
			t.Errorf("Stop returned a timer that had already ended (key %d)", tm.Key())
			continue
		}
		r := v.(*record)
		r.log("returned by Stop")
		o.stopped.Add(1)
		o.end(t, r, fateStopped, "stop")
	}
	o.live.Range(func(_, v any) bool {
		if r := v.(*record); r.fate.Load() == fatePending {
			t.Errorf("timer lost: neither ran, cancelled nor returned by Stop: %s", r.history())
		}
		return true
	})
}
