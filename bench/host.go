package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// Host describes the machine a report was measured on.
type Host struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPU        string `json:"cpu,omitempty"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
}

// host describes this machine, with GOMAXPROCS as it is now.
func host() Host {
	return Host{
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		CPU:        cpuModel(),
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
	}
}

// cpuModel returns the CPU's model name on Linux, or "" elsewhere.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func (h Host) String() string {
	s := h.OS + "/" + h.Arch
	if h.CPU != "" {
		s += ", " + h.CPU
	}
	return fmt.Sprintf("%s, %d CPUs, GOMAXPROCS %d, %s", s, h.NumCPU, h.GOMAXPROCS, h.Go)
}

// busyCores is the one definition of a busy host, for every report's
// warning and for -wait-quiet: other processes keeping, on average over a
// window, at least this many cores busy: the larger of a quarter of a
// core and a tenth of the host's CPUs (numCPU, runtime.NumCPU, not
// GOMAXPROCS: other processes use the whole host).
func busyCores(numCPU int) float64 { return max(0.25, 0.1*float64(numCPU)) }

// otherBusy returns how many cores other processes kept busy on average
// over a window (their CPU time, other, over its length), and whether
// that makes the host busy by busyCores. A window of 0 is never busy.
func otherBusy(other, window time.Duration, numCPU int) (cores float64, busy bool) {
	if window <= 0 {
		return 0, false
	}
	cores = other.Seconds() / window.Seconds()
	return cores, cores >= busyCores(numCPU)
}
