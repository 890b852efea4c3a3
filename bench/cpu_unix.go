//go:build unix

package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// cpuTime returns the CPU time the process has used, user plus system.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
