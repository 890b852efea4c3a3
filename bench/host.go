package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
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
