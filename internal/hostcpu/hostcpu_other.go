//go:build !linux

package hostcpu

import "time"

// Host returns false: only Linux exposes the host's CPU time cheaply.
func Host() (time.Duration, bool) { return 0, false }

// ThreadWait returns false: only Linux exposes the threads' run-queue
// wait.
func ThreadWait() (time.Duration, bool) { return 0, false }
