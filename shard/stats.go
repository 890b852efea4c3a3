package shard

import (
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"
)

// Stats is a snapshot of one shard's counters and latency distributions.
// Counts are totals since the shard started. The worker publishes its
// counters once per pass, after the pass's tasks ran (a task that reads
// Stats does not see its own pass), so a snapshot may lag the worker by one
// pass and
// its fields were not all read at the same instant: consistent enough for
// monitoring, not for accounting (use Scheduler.Pending for that).
type Stats struct {
	// Resident is the number of nodes the shard holds: timers in the wheel
	// (including cancelled ones not yet freed, normally for under a pass)
	// plus new timers in the incoming queues.
	Resident int `json:"resident"`
	// Scheduled counts timers accepted by Schedule. Summed over the
	// shards, at quiescence and after Stop, Scheduled = Fired + Cancelled
	// + Stopped + Scheduler.Pending().
	Scheduled uint64 `json:"scheduled"`
	// Fired counts tasks started.
	Fired uint64 `json:"fired"`
	// Cancelled counts Cancel calls that returned true.
	Cancelled uint64 `json:"cancelled"`
	// TakenBack counts the cancelled timers whose Cancel took them back
	// from their shard's queue before the shard saw them: the shard did
	// no work for them (a subset of Cancelled).
	TakenBack uint64 `json:"taken_back"`
	// Reset counts successful Reset calls.
	Reset uint64 `json:"reset"`
	// Stopped counts timers returned by Stop.
	Stopped uint64 `json:"stopped"`
	// Queued is the number of new timers waiting in the incoming
	// queues, and QueuedPeak the largest depth a pass has seen.
	Queued     int `json:"queued"`
	QueuedPeak int `json:"queued_peak"`
	// TransferLast is the number of timers moved from the queues to the
	// wheel during the last tick that moved any, TransferPeak the most in
	// one tick, and CapHits the ticks that reached the transfer cap.
	TransferLast int    `json:"transfer_last"`
	TransferPeak int    `json:"transfer_peak"`
	CapHits      uint64 `json:"cap_hits"`
	// Ticks counts passes that processed at least one new tick;
	// TicksSkipped counts ticks the shard slept through because nothing
	// was due (an idle shard does not wake every tick).
	Ticks        uint64 `json:"ticks"`
	TicksSkipped uint64 `json:"ticks_skipped"`
	// Refiled counts timers moved within the wheel: cascades from a
	// higher level, and Resets found at their old slot.
	Refiled uint64 `json:"refiled"`
	// RefiledPeak is the most timers one pass moved within the wheel:
	// cascades, at most, per higher level, the larger of 1024 and the
	// slot's share (its timers times the ticks the pass covers, over the
	// ticks left before the slot's cascade deadline; a whole slot only
	// if the worker stalled past that deadline), plus timers whose Reset
	// moved them.
	RefiledPeak int `json:"refiled_peak"`
	// HeldCancelled is the number of cancelled timers whose nodes the
	// wheel still holds; Sweeps counts completed sweeps and Swept the
	// cancelled nodes they freed.
	HeldCancelled int    `json:"held_cancelled"`
	Sweeps        uint64 `json:"sweeps"`
	Swept         uint64 `json:"swept"`
	// SlowestPass is the longest pass the worker made and what it did:
	// the cause of the worst stall a shard had.
	SlowestPass PassWork `json:"slowest_pass"`
	// Panics counts tasks that panicked.
	Panics uint64 `json:"panics"`
	// TickLag is how late the worker started processing a tick it had
	// planned to wake for, versus the tick's start. A worker parked with
	// nothing due plans no tick: the pass a producer wakes it for records
	// no lag.
	TickLag hist.Snapshot `json:"tick_lag"`
	// Lateness is how late tasks started versus their deadline tick's
	// start, which is the requested deadline (the clock reading of the
	// Schedule or Reset call plus the delay) rounded up to the tick grid:
	// what the task sees is Lateness plus less than one tick. Up to
	// lateSample tasks of one tick share a sample.
	Lateness hist.Snapshot `json:"lateness"`
	// PassTime is how long each pass took: picking up new timers,
	// cascades, and the due tasks it ran.
	PassTime hist.Snapshot `json:"pass_time"`
	// TaskTime is the run time of tasks run inline (or handed to the
	// executor), sampled one task in taskSampleEvery.
	TaskTime hist.Snapshot `json:"task_time"`
}

// taskSampleEvery sets how often a task's run time is measured: timing
// every task would cost two clock reads (about 50ns here) per timer.
const taskSampleEvery = 16

// Worker counters, kept in a plain array by the worker and copied to an
// atomic array once per pass, so that counting costs the hot path nothing.
const (
	cFired    = iota
	cConsumed // queue entries taken, over all lanes
	cResident // nodes linked in the wheel
	cQueuedPeak
	cTransferLast
	cTransferPeak
	cCapHits
	cTicks
	cTicksSkipped
	cRefiled
	cRefiledPeak
	cPanics
	cSlowNs // the slowest pass: duration and work
	cSlowTransferred
	cSlowRefiled
	cSlowFired
	numCounters
)

// PassWork describes one pass of a shard's worker.
type PassWork struct {
	// Duration is how long the pass took (zero with Stats off).
	Duration time.Duration `json:"duration"`
	// Transferred, Refiled and Fired count the new timers it moved into
	// the wheel, the timers it moved within the wheel, and the tasks it
	// ran.
	Transferred int `json:"transferred"`
	Refiled     int `json:"refiled"`
	Fired       int `json:"fired"`
}

// passWork is the worker's tally of the current pass.
type passWork struct{ transferred, refiled, fired int }

// workerStats is the worker's side of Stats. counts and the histograms'
// recording side belong to the worker; published and the histograms'
// snapshots may be read by anyone.
type workerStats struct {
	counts    [numCounters]uint64
	published [numCounters]atomic.Uint64
	tickLag   hist.Histogram
	lateness  hist.Histogram
	passTime  hist.Histogram
	taskTime  hist.Histogram
	tasks     uint64 // tasks run, for sampling
}

// publish copies the worker's counters for readers. Worker only.
func (ws *workerStats) publish() {
	for i, v := range ws.counts {
		if ws.published[i].Load() != v {
			ws.published[i].Store(v)
		}
	}
}

// Stats returns a snapshot of the shard's statistics. Safe for concurrent
// use; it never blocks the worker.
func (sh *Shard) Stats() Stats {
	p := &sh.stats.published
	var st Stats
	consumed := p[cConsumed].Load()
	var pushed uint64
	for i := range sh.lanes {
		l := &sh.lanes[i]
		st.Scheduled += l.scheduled.Load()
		pushed += l.pushed()
		st.Reset += l.resets.Load()
		st.Cancelled += l.cancels.Load()
		st.TakenBack += l.reclaimed.Load()
	}
	// A node can be consumed before its Schedule call counts it, so the
	// depth is clamped at 0.
	st.Queued = int(pushed - min(consumed, pushed))
	st.Resident = int(p[cResident].Load()) + st.Queued
	st.Fired = p[cFired].Load()
	st.Stopped = sh.stopped.Load()
	st.QueuedPeak = int(p[cQueuedPeak].Load())
	st.TransferLast = int(p[cTransferLast].Load())
	st.TransferPeak = int(p[cTransferPeak].Load())
	st.CapHits = p[cCapHits].Load()
	st.Ticks = p[cTicks].Load()
	st.TicksSkipped = p[cTicksSkipped].Load()
	st.Refiled = p[cRefiled].Load()
	st.RefiledPeak = int(p[cRefiledPeak].Load())
	st.SlowestPass = PassWork{
		Duration:    time.Duration(p[cSlowNs].Load()),
		Transferred: int(p[cSlowTransferred].Load()),
		Refiled:     int(p[cSlowRefiled].Load()),
		Fired:       int(p[cSlowFired].Load()),
	}
	st.Panics = p[cPanics].Load()
	st.TickLag = sh.stats.tickLag.Snapshot()
	st.Lateness = sh.stats.lateness.Snapshot()
	st.PassTime = sh.stats.passTime.Snapshot()
	st.TaskTime = sh.stats.taskTime.Snapshot()
	return st
}

// recordTick accounts for a pass that reached tick target at clock reading
// now. Worker only.
func (sh *Shard) recordTick(now time.Duration, target uint64) {
	if target <= sh.w.elapsed {
		return // woken early: no new tick
	}
	c := &sh.stats.counts
	c[cTicks]++
	if sh.slept {
		c[cTicksSkipped] += target - sh.w.elapsed - 1
	}
	if sh.cfg.Stats && sh.timed && target >= sh.wakeTick {
		sh.stats.tickLag.Record(int64(now - sh.tickTime(sh.wakeTick)))
	}
}

// recordPass accounts for the work of the pass that started at clock
// reading start. Worker only.
func (sh *Shard) recordPass(start time.Duration) {
	c, w := &sh.stats.counts, sh.work
	c[cRefiledPeak] = max(c[cRefiledPeak], uint64(w.refiled))
	var took time.Duration
	if sh.cfg.Stats {
		took = sh.clock.Now() - start
		sh.stats.passTime.Record(int64(took))
	}
	// Ties (every pass takes 0 with Stats off) go to the pass that did
	// the most.
	work, slowWork := uint64(w.transferred+w.refiled+w.fired), c[cSlowTransferred]+c[cSlowRefiled]+c[cSlowFired]
	if uint64(took) > c[cSlowNs] || uint64(took) == c[cSlowNs] && work > slowWork {
		c[cSlowNs] = uint64(took)
		c[cSlowTransferred], c[cSlowRefiled], c[cSlowFired] =
			uint64(w.transferred), uint64(w.refiled), uint64(w.fired)
	}
}
