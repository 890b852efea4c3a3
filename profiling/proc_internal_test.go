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
	over := func(work func()) float64 {
		before, start := readProc(), time.Now()
		work()
		return procSub(readProc(), before, time.Since(start)).Saturation
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
	// Spinning goroutines run or wait on the OS's run queues all along
	// (Linux counts the wait; elsewhere a busy host may take some of the
	// CPU time away), and a sleeping process does neither.
	assert.Greater(t, busy, 0.7, "spinning")
	assert.Less(t, idle, 0.3, "sleeping")
}
