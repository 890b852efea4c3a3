package shard

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// settleWithin bounds how long settle and endRunners wait: generous, for a
// busy host under -race; a runner stuck that long fails the test.
const settleWithin = time.Minute

// settle waits until sh's current runner has run every run handed to it
// and parked, so that a test playing the shard goroutine (harness) sees
// the tasks of a pass run once the pass is over. The runner's CAS that
// parks it orders the tasks' writes before the test's reads.
func settleRuns(t testing.TB, sh *Shard) {
	if t != nil {
		t.Helper()
	}
	r := sh.runner
	if r == nil {
		return
	}
	deadline := time.Now().Add(settleWithin)
	for spins := 0; ; spins++ {
		w := r.word.Load()
		if w&runLeft != 0 || (w&runIdle != 0 && w>>runShift == r.tail.Load()) {
			return
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("the runner has not run its runs within %v: word %#x, tail %d", settleWithin, w, r.tail.Load())
			if t == nil {
				panic(msg)
			}
			t.Fatal(msg)
		}
		if spins < 1000 {
			runtime.Gosched() // the runner is usually a few microseconds from done
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
}

// playShardGoroutine makes the calling test the goroutine of sh, a shard
// it drives without starting it (harness): counted in Shard.goroutines,
// as Start counts the goroutine, and ended when the test ends
// (endRunners).
func playShardGoroutine(t testing.TB, sh *Shard) {
	sh.goroutines.Store(1)
	t.Cleanup(func() { endRunners(t, sh) })
}

// endRunners ends the runners of sh, a shard a test drove without its
// goroutine (playShardGoroutine), as the goroutine's exit does, and waits
// for them.
func endRunners(t testing.TB, sh *Shard) {
	t.Helper()
	sh.Close()
	sh.exit()
	select {
	case <-sh.exited:
	case <-time.After(settleWithin):
		t.Errorf("the shard's runners have not ended within %v", settleWithin)
	}
}
