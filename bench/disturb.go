package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/units"
)

// Disturbances lag injects into its measured window with -disturb, so
// that an operator can check that the report names the cause of each: the
// trial the diagnosis is tested against.

// Disturbance kinds, -disturb's words.
const (
	disturbSleep = "sleep" // one task sleeps blockFor on its shard
	disturbHog   = "hog"   // 2*GOMAXPROCS goroutines spin
	disturbGC    = "gc"    // GOGC 5, a million live objects, goroutines that allocate
)

// blockFor is how long the sleep disturbance's task sleeps on its shard's
// runner (the tasks behind it move on after WithBlockedAfter, the report
// says so): a lock or a call held that long.
const blockFor = 50 * time.Millisecond

// Disturbance is one injected at At into the measured window, for For.
type Disturbance struct {
	Kind string        `json:"kind"`
	At   time.Duration `json:"at_ns"`
	For  time.Duration `json:"for_ns"`
}

// String describes d for the report.
func (d Disturbance) String() string {
	what := map[string]string{
		disturbSleep: "a task sleeps " + units.Duration(blockFor) + " on its shard",
		disturbHog:   fmt.Sprintf("%d goroutines spin", 2*runtime.GOMAXPROCS(0)),
		disturbGC:    fmt.Sprintf("GOGC 5, a million live objects, %d goroutines allocate", 2*runtime.GOMAXPROCS(0)),
	}[d.Kind]
	return fmt.Sprintf("%s at %s-%s into the capture: %s", d.Kind, units.Duration(d.At), units.Duration(d.At+d.For), what)
}

// parseDisturb returns the kinds of -disturb's comma-separated list.
func parseDisturb(s string) ([]string, error) {
	var kinds []string
	for k := range strings.SplitSeq(s, ",") {
		switch k = strings.TrimSpace(k); k {
		case disturbSleep, disturbHog, disturbGC:
			kinds = append(kinds, k)
		default:
			return nil, fmt.Errorf("%q is not sleep, hog or gc", k)
		}
	}
	return kinds, nil
}

// planDisturb spreads kinds evenly over a window of length d: the i-th
// of n at (i+1)/(n+1) of it, each lasting a second at most and at most
// half the gap to the next.
func planDisturb(kinds []string, d time.Duration) []Disturbance {
	gap := d / time.Duration(len(kinds)+1)
	out := make([]Disturbance, len(kinds))
	for i, k := range kinds {
		out[i] = Disturbance{Kind: k, At: gap * time.Duration(i+1), For: min(time.Second, gap/2)}
		if k == disturbSleep {
			out[i].For = blockFor
		}
	}
	return out
}

// disturb injects plan into s's window, which started at start, and
// returns once each has ended, or ctx has.
func disturb(ctx context.Context, s *shardwheel.Scheduler, start time.Time, plan []Disturbance) {
	for _, d := range plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(d.At))):
		}
		switch d.Kind {
		case disturbSleep:
			done := make(chan struct{})
			if _, err := s.AfterFunc(0, func() { time.Sleep(blockFor); close(done) }); err == nil {
				<-done
			}
		case disturbHog:
			spin(ctx, d.For, func() {})
		case disturbGC:
			var live *node
			for range 1 << 20 {
				live = &node{next: live}
			}
			prev := debug.SetGCPercent(5)
			var sink atomic.Pointer[node]
			spin(ctx, d.For, func() { sink.Store(&node{}) })
			debug.SetGCPercent(prev)
			runtime.KeepAlive(live)
		}
	}
}

// node is a heap object with a pointer, for the GC to mark.
type node struct {
	next *node
	_    [2]int
}

// spin runs work in a loop on 2*GOMAXPROCS goroutines for d, or until ctx
// ends.
func spin(ctx context.Context, d time.Duration, work func()) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for ctx.Err() == nil {
				work()
			}
		})
	}
	wg.Wait()
}
