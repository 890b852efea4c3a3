package hostcpu

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBusyCores: a quarter of a core, or a tenth of the CPUs when more.
func TestBusyCores(t *testing.T) {
	assert.Equal(t, 0.25, BusyCores(1))
	assert.Equal(t, 0.25, BusyCores(2))
	assert.InDelta(t, 1.6, BusyCores(16), 1e-9)
}

// TestOthers: other processes' cores are the host's busy time less ours,
// over the window, never negative.
func TestOthers(t *testing.T) {
	cores, busy := Others(3*time.Second, time.Second, 2*time.Second, 2)
	assert.Equal(t, 1.0, cores)
	assert.True(t, busy)
	cores, busy = Others(time.Second, 2*time.Second, time.Second, 2)
	assert.Zero(t, cores)
	assert.False(t, busy)
	_, busy = Others(time.Second, 0, 0, 2)
	assert.False(t, busy, "an empty window")
}

// TestReadingsGrow: the host's busy time never goes backwards, the
// process's CPU time counts a busy loop, and the threads' wait reads on
// Linux.
func TestReadingsGrow(t *testing.T) {
	p0, pok := Process()
	h0, hok := Host()
	w0, wok := ThreadWait()
	if runtime.GOOS == "linux" {
		require.True(t, hok && wok && pok)
	}
	for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
	}
	p1, _ := Process()
	h1, _ := Host()
	w1, _ := ThreadWait()
	if wok {
		assert.Positive(t, w0+w1, "threads have waited for a CPU at some point")
	}
	if pok {
		assert.Greater(t, p1, p0, "a busy loop costs CPU")
	}
	assert.GreaterOrEqual(t, h1, h0)
}
