//go:build linux

package shardwheel

import (
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"
)

// pinner returns the functions that pin the thread of shard i's goroutine
// and report a failure to do so, to log's logger. The shard goroutine
// calls pin after runtime.LockOSThread, so the mask applies to the thread
// that runs the shard and nothing else.
func pinner(i int, log func() *slog.Logger) (pin func() error, onErr func(error)) {
	pin = func() error {
		cpus, err := allowedCPUs()
		if err != nil {
			return err
		}
		return pinThread(cpus[i%len(cpus)])
	}
	onErr = func(err error) {
		log().Warn("shardwheel: shard runs unpinned", "shard", i, "err", err)
	}
	return pin, onErr
}

// cpuSetSize is CPU_SETSIZE, the number of CPUs a unix.CPUSet can name.
const cpuSetSize = 1024

// allowedCPUs lists the CPUs in the calling thread's affinity mask, so that
// pinning respects taskset, cgroups cpusets and container limits.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("shardwheel: sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < cpuSetSize; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("shardwheel: empty affinity mask")
	}
	return cpus, nil
}

// pinThread binds the calling OS thread to cpu. The caller must have locked
// its goroutine to the thread.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("shardwheel: pin to CPU %d: %w", cpu, err)
	}
	return nil
}
