package profiling

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel/internal/hostcpu"
)

// Saturation reads near 1 while more goroutines spin than there are Ps,
// and far below it while the process sleeps. Not parallel: it takes
// every P.
func TestSaturation(t *testing.T) {
	if _, ok := hostcpu.Process(); !ok {
		t.Skip("this OS does not report the process's CPU time")
	}
	var span time.Duration
	over := func(work func()) procDelta {
		before, start := readProc(), time.Now()
		work()
		span = time.Since(start)
		return procSub(readProc(), before, span)
	}
	idle := over(func() { time.Sleep(200 * time.Millisecond) })
	busy := over(func() {
		var quit atomic.Bool
		var wg sync.WaitGroup
		for range 2 * runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for !quit.Load() {
				}
			})
		}
		time.Sleep(200 * time.Millisecond)
		quit.Store(true)
		wg.Wait()
	})
	// Spinning goroutines run all along but for the time other processes
	// hold the CPUs, which their threads spend on the OS's run queues
	// (Linux counts it: ThreadWait); a sleeping process does neither.
	held := 0.0
	if busy.HostKnown {
		held = float64(busy.ThreadWait) / float64(span*time.Duration(busy.Procs))
	}
	assert.Greater(t, busy.Saturation+held, 0.7, "spinning: %+v", busy)
	assert.Less(t, idle.Saturation, 0.3, "sleeping: %+v", idle)
	assert.Equal(t, runtime.GOMAXPROCS(0), busy.Procs)
}
