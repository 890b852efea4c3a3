//go:build linux

package shardwheel

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestPinThread(t *testing.T) {
	cpus, err := allowedCPUs()
	require.NoError(t, err)
	if len(cpus) < 2 {
		t.Skip("needs at least 2 CPUs")
	}
	done := make(chan error)
	go func() {
		// Change the mask on a throwaway thread that stays locked: when
		// the goroutine exits, the runtime retires the thread with it.
		runtime.LockOSThread()
		var saved unix.CPUSet
		if err := unix.SchedGetaffinity(0, &saved); err != nil {
			done <- err
			return
		}
		target := cpus[len(cpus)-1]
		if err := pinThread(target); err != nil {
			done <- err
			return
		}
		var got unix.CPUSet
		if err := unix.SchedGetaffinity(0, &got); err != nil {
			done <- err
			return
		}
		assert.Equal(t, 1, got.Count())
		assert.True(t, got.IsSet(target))
		done <- unix.SchedSetaffinity(0, &saved)
	}()
	require.NoError(t, <-done)
}

func TestPinThreadReportsBadCPU(t *testing.T) {
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the mask may have changed
		done <- pinThread(cpuSetSize - 1)
	}()
	err := <-done
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pin to CPU 1023")
}

func TestAffinitySchedulerRuns(t *testing.T) {
	s, err := New(WithAffinity(true), WithTick(time.Millisecond))
	require.NoError(t, err)
	defer s.Stop()
	ran := make(chan struct{})
	_, err = s.AfterFunc(time.Millisecond, func() { close(ran) }, ByKey(1))
	require.NoError(t, err)
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("pinned shard never ran its timer")
	}
}
