package main

import (
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"
)

// Names of the implementations, as reports show them.
const (
	nameWheel  = "shardwheel"
	nameStdlib = "time.AfterFunc"
	// nameNull is the run of the load alone, through null.
	nameNull = "load alone"
)

// The calls each implementation's runs of the proxy-shaped load make, as
// Result.Call records them.
const (
	callWheel       = "s.AfterFunc"
	callWheelKeyed  = "ix.AfterFunc"
	callStdlib      = "time.AfterFunc"
	callStdlibKeyed = "time.AfterFunc in a sync.Map"
	callNull        = "none"
)

// Result is what one run measured, over its measured window only (after
// prefill and warm-up). JSON durations are integer nanoseconds.
type Result struct {
	Impl string `json:"impl"`
	// Call is the call that schedules the timers: s.AfterFunc (with
	// Timer.Cancel and Reset), ix.AfterFunc (an Index's, with its Cancel
	// and Reset), time.AfterFunc, time.AfterFunc in a sync.Map, or none
	// (the load alone).
	Call   string        `json:"call"`
	Shards int           `json:"shards,omitempty"`
	Tick   time.Duration `json:"tick_ns,omitempty"`
	// Affinity is set when shardwheel's shard goroutines were pinned
	// to CPUs (-affinity).
	Affinity bool `json:"affinity,omitempty"`
	// Keyed is set when the load reached timers by key (-keyed):
	// shardwheel's keyed API, or a sync.Map of time.AfterFunc timers.
	Keyed bool `json:"keyed,omitempty"`

	// Measured is the length of the measured window; shorter than asked
	// when Partial (the run was interrupted).
	Measured time.Duration `json:"measured_ns"`
	Partial  bool          `json:"partial"`

	// TargetRate is the offered request rate, AchievedRate the rate the
	// load managed to issue; KeptUp is false when it fell short by more
	// than 2%. MaxBacklog is the furthest the load fell behind the offer.
	TargetRate   float64       `json:"target_rate"`
	AchievedRate float64       `json:"achieved_rate"`
	KeptUp       bool          `json:"kept_up"`
	MaxBacklog   time.Duration `json:"max_backlog_ns"`

	Ops opCounts `json:"ops"`
	// OpsPerSec counts Schedule, Cancel and Reset calls.
	OpsPerSec   float64 `json:"ops_per_sec"`
	FiredPerSec float64 `json:"fired_per_sec"`

	// CPU is the process's user+system time over the window: load
	// generator included, the same for both implementations.
	CPU      time.Duration `json:"cpu_ns"`
	CPUPerOp float64       `json:"cpu_per_op_ns"`
	// Library is the implementation's own share of CPU, with the load's
	// subtracted; nil without a run of the load alone (compare's only).
	Library *libraryCPU `json:"library,omitempty"`
	GC      gcCost      `json:"gc"`

	// Resident is the number of timers pending when the heap was
	// measured, right after the window. TimerHeap is the live heap then,
	// less the heap before the run and less the load's own bookkeeping
	// (its handle tables): the timers' memory, their task closures
	// included.
	Resident      int     `json:"resident"`
	TimerHeap     int64   `json:"timer_heap_bytes"`
	BytesPerTimer float64 `json:"bytes_per_timer"`

	// Lateness is measured by every task itself, against the earliest
	// time it was allowed to run, the same way for both implementations.
	Lateness hist.Percentiles `json:"lateness"`
	// TickLag and WheelLateness come from shardwheel's Stats (nil for
	// AfterFunc); WheelLateness is against the deadline's tick.
	TickLag       *hist.Percentiles `json:"tick_lag,omitempty"`
	WheelLateness *hist.Percentiles `json:"wheel_lateness,omitempty"`
	// Wheel holds shardwheel's counters over the window (nil for
	// AfterFunc): where its time went when it fell behind.
	Wheel *wheelCounts `json:"wheel,omitempty"`

	// OtherCPU is the CPU time the rest of the host used over the window
	// (Linux only; 0 elsewhere): a busy host inflates every latency.
	OtherCPU time.Duration `json:"other_cpu_ns"`
}

// libraryCPU is an implementation's CPU less the load's: what its run
// cost per call, less what a call of the load alone cost (the null run),
// times the run's calls.
//
// Per call rather than over the same time, because the runs make
// different numbers of calls: a real implementation fires timers, and
// the load re-issues the background ones among them (about 6% more calls
// than the load alone makes with the default load); subtracting the
// load alone's CPU as it was would charge the implementation for the
// load's side of those calls. What stays charged to it is the work of
// its calls, of firing its timers and of holding them (GC), plus the
// bodies of the tasks it runs (the load's lateness recording): the same
// timers fire for both implementations, so that last part is the same
// for both.
type libraryCPU struct {
	// CPU is over the implementation's measured window.
	CPU   time.Duration `json:"cpu_ns"`
	PerOp float64       `json:"cpu_per_op_ns"`
	// Noise is set when PerOp is below noiseShare of the load alone's
	// CPU per call, negative included: too small for the subtraction to
	// tell from 0.
	Noise bool `json:"noise"`
}

// noiseShare is how far apart the CPU per call of two runs of one load can
// be on a shared host (10-30% in this project's measurements), taken at
// its low end: a library figure below this share of the load alone's CPU
// per call is within the subtraction's noise.
const noiseShare = 0.1

// libraryCost returns r's CPU with the load alone's, measured by alone,
// subtracted per call; nil when either run made no calls.
func libraryCost(r, alone *Result) *libraryCPU {
	n := r.Ops.calls()
	if n == 0 || alone.Ops.calls() == 0 {
		return nil
	}
	per := r.CPUPerOp - alone.CPUPerOp
	return &libraryCPU{
		CPU:   time.Duration(per * float64(n)),
		PerOp: per,
		Noise: per < noiseShare*alone.CPUPerOp,
	}
}

// wheelCounts are shardwheel Stats counters over a window.
type wheelCounts struct {
	Pending    int    `json:"pending"`
	QueuedPeak int    `json:"queued_peak"`
	CapHits    uint64 `json:"cap_hits"`
	Refiled    uint64 `json:"refiled"`
	Ticks      uint64 `json:"ticks"`
}

// opCounts are the load's calls and what came of them.
type opCounts struct {
	Requests  int64 `json:"requests"`
	Schedules int64 `json:"schedules"`
	Cancels   int64 `json:"cancels"`
	// Missed counts Cancels that came too late: the timer had run.
	Missed int64 `json:"cancels_missed"`
	Resets int64 `json:"resets"`
	// Reopened counts Resets of an idle timer that had run.
	Reopened int64 `json:"resets_reopened"`
	Fired    int64 `json:"fired"`
	Errors   int64 `json:"errors"`
}

// calls is the number of calls into the implementation.
func (c opCounts) calls() int64 { return c.Schedules + c.Cancels + c.Resets }

func (c opCounts) add(o opCounts) opCounts {
	return opCounts{
		Requests:  c.Requests + o.Requests,
		Schedules: c.Schedules + o.Schedules,
		Cancels:   c.Cancels + o.Cancels,
		Missed:    c.Missed + o.Missed,
		Resets:    c.Resets + o.Resets,
		Reopened:  c.Reopened + o.Reopened,
		Fired:     c.Fired + o.Fired,
		Errors:    c.Errors + o.Errors,
	}
}

func (c opCounts) sub(o opCounts) opCounts {
	return opCounts{
		Requests:  c.Requests - o.Requests,
		Schedules: c.Schedules - o.Schedules,
		Cancels:   c.Cancels - o.Cancels,
		Missed:    c.Missed - o.Missed,
		Resets:    c.Resets - o.Resets,
		Reopened:  c.Reopened - o.Reopened,
		Fired:     c.Fired - o.Fired,
		Errors:    c.Errors - o.Errors,
	}
}

// pending is the number of timers the counts leave pending. A Reset that
// found its timer run re-arms it, as much a start as a Schedule. Counts
// read while the load runs may hold more firings than starts, as tasks
// count a firing at once but workers publish their calls only after each
// batch: pending is then 0, not negative.
func (c opCounts) pending() int64 {
	return max(0, c.Schedules+c.Reopened-(c.Cancels-c.Missed)-c.Fired)
}
