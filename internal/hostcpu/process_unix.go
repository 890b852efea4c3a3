//go:build unix

package hostcpu

import (
	"time"

	"golang.org/x/sys/unix"
)

// Process returns the CPU time this process has used, user plus system.
func Process() (time.Duration, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
