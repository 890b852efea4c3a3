package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/hostcpu"
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
// warning and for -wait-quiet: hostcpu.BusyCores, which profiling's
// reports use too.
func busyCores(numCPU int) float64 { return hostcpu.BusyCores(numCPU) }

// otherBusy returns how many cores other processes kept busy on average
// over a window (their CPU time, other, over its length), and whether
// that makes the host busy by busyCores. A window of 0 is never busy.
func otherBusy(other, window time.Duration, numCPU int) (cores float64, busy bool) {
	return hostcpu.Others(other, 0, window, numCPU)
}

// cpuTime returns the CPU time the process has used, user plus system, or
// 0 where getrusage is not available: the report then shows CPU figures
// as 0 rather than guess.
func cpuTime() time.Duration {
	d, _ := hostcpu.Process()
	return d
}

// hostCPUTime returns the CPU time every CPU of the host has spent busy
// (steal time included: on a VM it is a neighbour's), or 0 off Linux,
// where the report then says nothing about other processes.
func hostCPUTime() time.Duration {
	d, _ := hostcpu.Host()
	return d
}
