// Package hostcpu reads how busy the host's CPUs are and how long this
// process's threads waited for one, for the reports that must say when a
// latency came from the host rather than from the Scheduler: bench's and
// profiling's. Each reading is a total since an arbitrary origin; callers
// subtract two. Where a figure cannot be read (another OS, a kernel
// without the file), it reads 0 and its ok result is false.
package hostcpu

import "time"

// BusyCores is the one definition of a busy host: other processes
// keeping, on average over a window, at least this many of its numCPU
// CPUs busy: the larger of a quarter of a core and a tenth of the CPUs
// (the host's, runtime.NumCPU, not GOMAXPROCS: other processes use the
// whole host).
func BusyCores(numCPU int) float64 { return max(0.25, 0.1*float64(numCPU)) }

// Others returns how many cores other processes kept busy on average over
// a window of length window, given the host's busy time (Host) and this
// process's CPU time (Process) over it, and whether that makes the host
// busy by BusyCores. A window of 0 is never busy.
func Others(host, self, window time.Duration, numCPU int) (cores float64, busy bool) {
	if window <= 0 {
		return 0, false
	}
	cores = max(host-self, 0).Seconds() / window.Seconds()
	return cores, cores >= BusyCores(numCPU)
}
