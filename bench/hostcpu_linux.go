package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/stat: 100 on every Linux architecture
// (the kernel's USER_HZ, fixed by its ABI).
const userHZ = 100

// hostCPUTime returns the CPU time every CPU of the host has spent busy,
// from /proc/stat, or 0 if it cannot be read. Steal time counts as busy:
// on a VM it is a neighbour's.
func hostCPUTime() time.Duration {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	// cpu user nice system idle iowait irq softirq steal guest guest_nice
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / userHZ
}
