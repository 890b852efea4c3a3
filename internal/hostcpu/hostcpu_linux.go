package hostcpu

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/stat: 100 on every Linux architecture (the
// kernel's USER_HZ, fixed by its ABI).
const userHZ = 100

// Host returns the CPU time every CPU of the host has spent busy, from
// /proc/stat. Steal time counts as busy: on a VM it is a neighbour's.
func Host() (time.Duration, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, false
	}
	// cpu user nice system idle iowait irq softirq steal guest guest_nice
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, false
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / userHZ, true
}

// ThreadWait returns how long this process's live threads have waited on
// the kernel's run queues, runnable but not running: the second field of
// /proc/self/task/*/schedstat. Threads that have exited no longer count,
// so the difference of two readings is a lower bound on the wait between
// them if a thread exited meanwhile (the Go runtime rarely ends its
// threads).
func ThreadWait() (time.Duration, bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	var wait int64
	read := false
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		// on-CPU time, run-queue wait (both ns), time slices
		f := bytes.Fields(b)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		wait += n
		read = true
	}
	return time.Duration(wait), read
}
