package profiling

import (
	"math"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/shardwheel/shardwheel/internal/hostcpu"
)

// What the process and the host did while a shard was late, to tell a
// shard goroutine that waited for a CPU from one that was busy or held by
// its tasks. Each snapshot of the Scheduler's Stats is taken with a
// reading of these; an interval's figures are the difference of two.

// The runtime/metrics the readings take.
const (
	// schedLatencies is the distribution of how long goroutines waited,
	// runnable, for a P: a sample of one scheduling in 8 or so, so a
	// single goroutine's wait may be missed, a busy process's not.
	schedLatencies = "/sched/latencies:seconds"
	// gcPauses is the distribution of the GC's stop-the-world pauses.
	gcPauses = "/sched/pauses/total/gc:seconds"
	// gcCycles counts completed GC cycles.
	gcCycles = "/gc/cycles/total:gc-cycles"
	// gcCPU, gcIdleCPU and totalCPU are the runtime's estimates of the
	// CPU time the GC took, the part of it on otherwise idle Ps (which
	// took nothing from goroutines), and the CPU time GOMAXPROCS made
	// available. The runtime brings them up to date at the end of each
	// GC cycle.
	gcCPU     = "/cpu/classes/gc/total:cpu-seconds"
	gcIdleCPU = "/cpu/classes/gc/mark/idle:cpu-seconds"
	totalCPU  = "/cpu/classes/total:cpu-seconds"
)

// procReading is one reading of the process and the host.
type procReading struct {
	sched, pauses                metrics.Float64Histogram
	cycles                       uint64
	gcCPU, gcIdleCPU, totalCPU   float64
	host, self, threadWait       time.Duration
	hostOK, selfOK, threadWaitOK bool
}

// readProc reads the process and the host now.
func readProc() procReading {
	s := []metrics.Sample{
		{Name: schedLatencies}, {Name: gcPauses}, {Name: gcCycles}, {Name: gcCPU}, {Name: gcIdleCPU}, {Name: totalCPU},
	}
	metrics.Read(s)
	var p procReading
	hist := func(v metrics.Value) metrics.Float64Histogram {
		if v.Kind() != metrics.KindFloat64Histogram {
			return metrics.Float64Histogram{}
		}
		h := v.Float64Histogram()
		// Read may reuse the slices: keep copies.
		return metrics.Float64Histogram{Counts: append([]uint64(nil), h.Counts...), Buckets: append([]float64(nil), h.Buckets...)}
	}
	float := func(v metrics.Value) float64 {
		if v.Kind() != metrics.KindFloat64 {
			return 0
		}
		return v.Float64()
	}
	p.sched, p.pauses = hist(s[0].Value), hist(s[1].Value)
	if s[2].Value.Kind() == metrics.KindUint64 {
		p.cycles = s[2].Value.Uint64()
	}
	p.gcCPU, p.gcIdleCPU, p.totalCPU = float(s[3].Value), float(s[4].Value), float(s[5].Value)
	p.host, p.hostOK = hostcpu.Host()
	p.self, p.selfOK = hostcpu.Process()
	p.threadWait, p.threadWaitOK = hostcpu.ThreadWait()
	return p
}

// procDelta is what the process and the host did over an interval.
type procDelta struct {
	// SchedMax is the longest a goroutine waited, runnable, for a P, as
	// far as the runtime's sample of them shows (the upper bound of the
	// highest bucket that counted one), and SchedP99 the 99th percentile;
	// SchedCount is how many waits were sampled.
	SchedMax   time.Duration `json:"sched_latency_max_ns"`
	SchedP99   time.Duration `json:"sched_latency_p99_ns"`
	SchedCount uint64        `json:"sched_latency_count"`
	// GCCycles counts the GC cycles that ended, GCPauseMax is their
	// longest stop-the-world pause (an upper bound), and GCShare the
	// share of the CPU time GOMAXPROCS made available that those cycles
	// took from goroutines (idle-P marking left out).
	GCCycles   uint64        `json:"gc_cycles"`
	GCPauseMax time.Duration `json:"gc_pause_max_ns"`
	GCShare    float64       `json:"gc_cpu_share"`
	// OtherCores is how many cores other processes kept busy on average,
	// and ThreadWait how long this process's threads waited in all on
	// the OS's run queues (both Linux only: HostKnown).
	OtherCores float64       `json:"other_cores"`
	ThreadWait time.Duration `json:"thread_wait_ns"`
	HostKnown  bool          `json:"host_known"`
	// Saturation is the share of the CPU time its Procs Ps offered over
	// the interval that the process used (Unix): near 1, its goroutines
	// kept every P busy, and a goroutine whose timer came due waited for
	// one of them to be preempted before the timer ran. The runtime's
	// scheduling latencies do not count that wait: they start once the
	// timer has made the goroutine runnable. Time the process's threads
	// waited for a CPU that other processes held is ThreadWait's, not
	// this. 0 where the process's CPU time cannot be read.
	Saturation float64 `json:"p_saturation"`
	Procs      int     `json:"gomaxprocs"`
}

// procSub returns what happened between the readings prev and cur, span
// apart.
func procSub(cur, prev procReading, span time.Duration) procDelta {
	var d procDelta
	d.SchedMax, d.SchedP99, d.SchedCount = histSub(cur.sched, prev.sched)
	d.GCPauseMax, _, _ = histSub(cur.pauses, prev.pauses)
	d.GCCycles = cur.cycles - min(prev.cycles, cur.cycles)
	if total := cur.totalCPU - prev.totalCPU; total > 0 {
		gc := (cur.gcCPU - cur.gcIdleCPU) - (prev.gcCPU - prev.gcIdleCPU)
		d.GCShare = min(max(gc/total, 0), 1)
	}
	if cur.hostOK && prev.hostOK && cur.selfOK && prev.selfOK && cur.threadWaitOK && prev.threadWaitOK {
		d.HostKnown = true
		d.OtherCores, _ = hostcpu.Others(cur.host-prev.host, cur.self-prev.self, span, runtime.NumCPU())
		d.ThreadWait = max(cur.threadWait-prev.threadWait, 0)
	}
	d.Procs = runtime.GOMAXPROCS(0)
	if cur.selfOK && prev.selfOK && span > 0 {
		d.Saturation = float64(max(cur.self-prev.self, 0)) / float64(span*time.Duration(d.Procs))
	}
	return d
}

// histSub returns the highest value (the upper bound of the highest
// bucket whose count grew; its lower bound if that is +Inf), the 99th
// percentile (likewise) and the count of the values recorded between
// two readings of one runtime histogram.
func histSub(cur, prev metrics.Float64Histogram) (top, p99 time.Duration, n uint64) {
	if len(cur.Counts) == 0 || len(prev.Counts) != len(cur.Counts) {
		return 0, 0, 0
	}
	diff := make([]uint64, len(cur.Counts))
	for i, c := range cur.Counts {
		diff[i] = c - min(prev.Counts[i], c)
		n += diff[i]
	}
	if n == 0 {
		return 0, 0, 0
	}
	bound := func(i int) time.Duration {
		b := cur.Buckets[i+1]
		if math.IsInf(b, 1) {
			b = cur.Buckets[i]
		}
		return time.Duration(b * 1e9)
	}
	rank := uint64(math.Ceil(0.99 * float64(n)))
	var seen uint64
	for i, c := range diff {
		if c == 0 {
			continue
		}
		if seen < rank && seen+c >= rank {
			p99 = bound(i)
		}
		seen += c
		top = bound(i)
	}
	return top, p99, n
}
