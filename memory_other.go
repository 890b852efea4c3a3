//go:build !linux

package shardwheel

// physicalMemory returns 0: the machine's RAM is not looked up off Linux, so
// New checks option combinations against the Go memory limit alone.
func physicalMemory() uint64 { return 0 }
