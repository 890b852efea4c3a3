//go:build unix

package shardwheel_test

import (
	"syscall"
	"time"
)

// processCPU returns the user plus system CPU time the process has used,
// from getrusage(2).
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
