package shardwheel_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel"
)

// A heartbeat every 10ms, on the grid from the call: one node for the
// whole series, no re-arming in the task. SkipMissed, the default, makes a
// stalled shard run it once and go on, instead of a burst of catch-up
// beats (OnMissed(BurstMissed) would run them all).
// CancelWait ends the series and waits for a beat in progress.
func ExampleScheduler_Every() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	beats := make(chan time.Time, 16)
	start := time.Now()
	hb, err := s.Every(10*time.Millisecond, func() {
		select {
		case beats <- time.Now():
		default:
		}
	})
	if err != nil {
		panic(err) // ErrBadPeriod, ErrStopped, ...
	}
	onGrid := true
	for k := 1; k <= 3; k++ {
		at := <-beats
		onGrid = onGrid && at.Sub(start) >= time.Duration(k)*10*time.Millisecond
	}
	fmt.Println("three beats, none early:", onGrid)
	live, _ := hb.CancelWait(context.Background())
	fmt.Println("series ended:", live, "pending:", hb.Pending())
	// Output:
	// three beats, none early: true
	// series ended: true pending: false
}

// An idle timeout that may fire up to a second late: the shard files it
// where it runs without cascading, beside thousands of others, on a shared
// tick. It never runs early.
func ExampleSlack() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	start := time.Now()
	closed := make(chan time.Duration, 1)
	_, err = s.AfterFunc(50*time.Millisecond, func() { closed <- time.Since(start) }, shardwheel.Slack(time.Second))
	if err != nil {
		panic(err)
	}
	took := <-closed
	fmt.Println("closed after its delay:", took >= 50*time.Millisecond)
	// Output:
	// closed after its delay: true
}

// Cancel returns false once a task has started, and cannot say when it
// ends. CancelWait waits for it: when it returns false, the task has
// returned, so what it wrote may be read and what it used may be freed.
func ExampleTimer_CancelWait() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	started := make(chan struct{})
	var flushed atomic.Bool
	t, err := s.AfterFunc(0, func() {
		close(started)
		time.Sleep(20 * time.Millisecond)
		flushed.Store(true)
	}, shardwheel.ByKey(1))
	if err != nil {
		panic(err)
	}
	<-started
	cancelled, err := t.CancelWait(context.Background())
	fmt.Println("cancelled:", cancelled, "error:", err, "flushed:", flushed.Load())
	// Output:
	// cancelled: false error: <nil> flushed: true
}

// A task that blocks does not hold up its wheel: past WithBlockedAfter (a
// tick by default) a new goroutine goes on with the wheel's other timers,
// and Stats names the task while it blocks. Later timers of its key wait
// for it.
func ExampleWithBlockedAfter() {
	s, err := shardwheel.New(shardwheel.WithShards(1))
	if err != nil {
		panic(err)
	}
	defer s.Stop() // waits for the blocked task, as for any task
	release, wentOn := make(chan struct{}), make(chan struct{})
	if _, err := s.AfterFunc(0, func() { <-release }, shardwheel.ByKey(7)); err != nil { // blocks its wheel's goroutine
		panic(err)
	}
	if _, err := s.AfterFunc(5*time.Millisecond, func() { close(wentOn) }); err != nil {
		panic(err)
	}
	<-wentOn
	fmt.Println("the wheel went on")
	b := s.Stats().Total.Blocked
	fmt.Println("blocked tasks:", len(b), "key", b[0].Key)
	close(release)
	// Output:
	// the wheel went on
	// blocked tasks: 1 key 7
}
