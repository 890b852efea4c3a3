//go:build !unix

package shardwheel_test

import "time"

// processCPU reports that this OS has no getrusage(2): BenchmarkResident
// omits its idle-%core metric here (heap and GC figures are unaffected).
// Windows could use GetProcessTimes; no one has needed it yet.
func processCPU() (time.Duration, bool) { return 0, false }
