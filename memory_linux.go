//go:build linux

package shardwheel

import "golang.org/x/sys/unix"

// physicalMemory returns the machine's total RAM in bytes, or 0 if unknown.
func physicalMemory() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
