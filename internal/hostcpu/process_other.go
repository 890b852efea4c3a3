//go:build !unix

package hostcpu

import "time"

// Process returns false: getrusage is not available.
func Process() (time.Duration, bool) { return 0, false }
