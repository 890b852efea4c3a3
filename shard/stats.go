package shard

import (
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"
)

// Stats is a snapshot of one shard's counters and latency distributions;
// package shardwheel documents each field (ShardStats). Counts are totals
// since the shard started.
type Stats struct {
	Resident      int
	Scheduled     uint64
	Fired         uint64
	Cancelled     uint64
	TakenBack     uint64
	Reset         uint64
	Stopped       uint64
	Queued        int
	QueuedPeak    int
	TransferLast  int
	TransferPeak  int
	CapHits       uint64
	Ticks         uint64
	TicksSkipped  uint64
	Refiled       uint64
	RefiledPeak   int
	HeldCancelled int
	Sweeps        uint64
	Swept         uint64
	SlowestPass   PassWork
	Panics        uint64
	// PeriodicRuns counts the runs of periodic timers' tasks, which
	// Fired does not (a series is one timer, however often it runs), and
	// PeriodicMissed the grid points they missed (periodic.go).
	PeriodicRuns   uint64
	PeriodicMissed uint64
	// Crossed counts the routed timers this shard handed over to the
	// shard their key routes to (cross.go).
	Crossed uint64
	// NodesAllocated is the nodes the arena's blocks hold now, in use or
	// free; NodesReleased the nodes of the blocks it gave back so far
	// (reserve.go), BlocksReleased and BlocksRemade how many blocks it
	// gave back and made again.
	NodesAllocated uint64
	NodesReleased  uint64
	BlocksReleased uint64
	BlocksRemade   uint64
	TickLag        hist.Snapshot
	Lateness       hist.Snapshot
	PassTime       hist.Snapshot
	TaskTime       hist.Snapshot
}

// publishEvery: a holder publishes its count of timers filed at once every
// 2^20 of them, so that the published count stays within own's 30 bits of
// the true one (see scheduledNow) whoever else publishes or not.
const publishEvery = 1<<20 - 1

// taskSampleEvery sets how often a task's run time is measured: timing
// every task would cost two clock reads (about 50ns here) per timer.
const taskSampleEvery = 16

// Holder counters: kept in the plain array holder.counts by whoever holds
// the wheel, and copied to an atomic array (publish) by the shard
// goroutine after each pass and by readers that find the wheel free, so
// that counting costs the hot path no atomic operation.
const (
	cScheduled      = iota // timers filed at once by a holding producer
	cFired                 // tasks started
	cConsumed              // nodes taken from the queue
	cResident              // nodes linked in the wheel
	cQueuedPeak            // most nodes found in the queue by a transfer
	cTransferLast          // nodes transferred in the last tick that moved any
	cTransferPeak          // most nodes transferred in one tick
	cCapHits               // ticks that reached TransferCap
	cTicks                 // passes that processed a new tick
	cTicksSkipped          // ticks slept through with nothing due
	cRefiled               // nodes moved within the wheel
	cRefiledPeak           // most nodes one pass moved within the wheel
	cFreedCancelled        // cancelled nodes freed
	cTakenBack             // cancelled nodes their Cancel freed at once
	cSweeps                // sweeps completed
	cSwept                 // cancelled nodes sweeps freed
	cPanics                // tasks that panicked
	cSlowNs                // the slowest pass: duration and work
	cSlowTransferred
	cSlowRefiled
	cSlowFired
	cPeriodicRuns   // runs of periodic timers' tasks (not in cFired)
	cBlocksReleased // big blocks given back (reserve.go)
	cBlocksRemade   // released big blocks made again
	cCrossed        // routed timers handed over to their key's shard
	cProxied        // proxies taken off the queue (not counted in cConsumed)
	numCounters
)

// PassWork describes one pass of a shard goroutine.
type PassWork struct {
	// Duration is how long the pass took (zero with Stats off).
	Duration time.Duration
	// Transferred, Refiled and Fired count the new timers it moved into
	// the wheel, the timers it moved within the wheel, and the tasks it
	// ran.
	Transferred int
	Refiled     int
	Fired       int
}

// passWork is the shard goroutine's tally of the current pass: besides
// PassWork's counts, cascaded is the part of refiled that cascades moved,
// and filed the timers it filed again that were not new (Resets found on
// the attention stack, periodic timers after a run), which the execution
// tracer shows (trace.go).
type passWork struct{ transferred, refiled, fired, cascaded, filed int }

// workerStats is the shard goroutine's side of Stats: it records the
// histograms, which anyone may snapshot, and counts tasks for sampling;
// published is the holder counters' atomic copy, written by holders (see
// publish) and read by anyone.
type workerStats struct {
	published [numCounters]atomic.Uint64
	// scheduledSeen is the most Scheduled that Stats has reported
	// (reportScheduled): written by readers only.
	scheduledSeen atomic.Uint64
	tickLag       hist.Histogram
	lateness      hist.Histogram
	passTime      hist.Histogram
	taskTime      hist.Histogram
	tasks         uint64 // tasks run, for sampling
}

// publish copies the holder's counters for readers. Holder only.
func (sh *Shard) publish() {
	sh.assertHolder()
	c := &sh.h.counts
	c[cResident] = uint64(sh.h.w.count)
	for i, v := range c {
		if sh.stats.published[i].Load() != v {
			sh.stats.published[i].Store(v)
		}
	}
}

// nudge wakes a shard goroutine that sleeps past the next tick, so that a
// pass publishes what holders have counted since its last one (publish):
// the holder counters a reader sees trail by a pass at most, and a reader
// writes no line a Schedule or Cancel writes. Any goroutine; never waits.
func (sh *Shard) nudge() {
	if until := sh.sleepUntil.Load(); until > sh.plannedAt.Load()+1 {
		sh.signal()
	}
}

// laneSums adds up the lanes' counters.
type laneSums struct{ queued, undone, resets, cancels, missed uint64 }

func (sh *Shard) sumLanes() laneSums {
	var s laneSums
	for i := range sh.lanes {
		l := &sh.lanes[i]
		// undone before queued: an undo follows its own push, so a
		// reader that sees the undo sees the push too, and Scheduled
		// never reads an undone push as a negative count.
		s.undone += l.undone.Load()
		s.queued += l.queued.Load()
		s.resets += l.resets.Load()
		s.cancels += l.cancels.Load()
		s.missed += l.missed.Load()
	}
	return s
}

// scheduledNow returns the timers the shard has accepted: those filed at
// once by a holding producer, whose exact count is the published one
// brought up to date with the low bits the last holder left in own, plus
// those pushed on the queue, less the Schedules undone by Stop. Any
// goroutine.
//
// The published count and own's low bits are two readings of one counter:
// the newer one wins. own's bits are newer unless a holder has published
// its count (every publishEvery filings, or in publish) and not yet let
// go: then they trail the published count by a little, which their 30-bit
// difference shows as half the range or more.
func (sh *Shard) scheduledNow(l laneSums) uint64 {
	held := heldCount(sh.stats.published[cScheduled].Load(), sh.own.Load()>>ownCountShift&ownCountMask)
	return held + l.queued - min(l.undone, held+l.queued)
}

// heldCount returns the timers holders filed at once, from the published
// count pub and the low bits own carries (see scheduledNow).
func heldCount(pub, low uint64) uint64 {
	if ahead := (low - pub) & ownCountMask; ahead < 1<<(ownCountBits-1) {
		pub += ahead
	}
	return pub
}

// reportScheduled returns the Scheduled figure Stats reports for the exact
// count v: the most any Stats call has reported, so that the counter never
// goes backwards. v itself can, by one for each Schedule that Stop undoes
// (see undo), after a reader counted it. Any goroutine.
func (sh *Shard) reportScheduled(v uint64) uint64 {
	for {
		seen := sh.stats.scheduledSeen.Load()
		if v <= seen {
			return seen
		}
		if sh.stats.scheduledSeen.CompareAndSwap(seen, v) {
			return v
		}
	}
}

// Ins and Outs split Live in two, for a reader that sums several shards:
// read every shard's Ins, then every shard's Outs, and the difference is
// at most the timers that were pending at one moment between the two
// reads, never more (each count only grows, and a timer is counted out
// after it was counted in). Any goroutine; they write nothing.
func (sh *Shard) Ins() uint64 {
	pub := sh.stats.published[cScheduled].Load()
	low := sh.own.Load() >> ownCountShift & ownCountMask
	var queued uint64
	for i := range sh.lanes {
		queued += sh.lanes[i].queued.Load()
	}
	return heldCount(pub, low) + queued
}

// Outs is the other half of Live (see Ins): timers fired, cancelled,
// stopped, and Schedules that Stop undid. A timer's out is counted before
// its pending token is given back, so Ins minus Outs never exceeds
// WithMaxPending's limit.
func (sh *Shard) Outs() uint64 {
	var out uint64
	for i := range sh.lanes {
		l := &sh.lanes[i]
		out += l.undone.Load() + l.cancels.Load()
	}
	return out + sh.stats.published[cFired].Load() + sh.crossedFired.Load() + sh.stopped.Load()
}

// Live returns the timers accepted and not yet ended: scheduled, less
// fired, cancelled and stopped (Ins, then Outs). While timers are being
// scheduled and cancelled concurrently it is at most what was pending at
// one moment during the call, never negative; exact when the shard is
// quiescent. Any goroutine.
func (sh *Shard) Live() int64 {
	in := sh.Ins()
	return int64(in - min(sh.Outs(), in))
}

// Stats returns a snapshot of the shard's statistics. Safe for concurrent
// use; it never waits for the shard.
func (sh *Shard) Stats() Stats {
	sh.nudge()
	p := &sh.stats.published
	l := sh.sumLanes()
	var st Stats
	consumed := p[cConsumed].Load()
	// A node can be consumed before its Schedule call counts it, so the
	// depth is clamped at 0.
	st.Queued = int(l.queued - min(consumed, l.queued))
	st.Scheduled = sh.reportScheduled(sh.scheduledNow(l))
	st.Cancelled = l.cancels
	st.Reset = l.resets
	st.Resident = int(p[cResident].Load()) + st.Queued
	st.Fired = p[cFired].Load() + sh.crossedFired.Load()
	st.Crossed = p[cCrossed].Load()
	st.TakenBack = p[cTakenBack].Load()
	st.Stopped = sh.stopped.Load()
	held := l.cancels + l.undone
	st.HeldCancelled = int(held - min(held, p[cFreedCancelled].Load()))
	st.Sweeps = p[cSweeps].Load()
	st.Swept = p[cSwept].Load()
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
	st.PeriodicRuns = p[cPeriodicRuns].Load()
	st.PeriodicMissed = l.missed
	st.NodesAllocated, st.NodesReleased = sh.arena.Footprint()
	st.BlocksReleased = p[cBlocksReleased].Load()
	st.BlocksRemade = p[cBlocksRemade].Load()
	st.TickLag = sh.stats.tickLag.Snapshot()
	st.Lateness = sh.stats.lateness.Snapshot()
	st.PassTime = sh.stats.passTime.Snapshot()
	st.TaskTime = sh.stats.taskTime.Snapshot()
	return st
}

// recordTick accounts for a pass that reached tick target at clock reading
// now. Shard goroutine, holding the wheel.
func (sh *Shard) recordTick(now time.Duration, target uint64) {
	if target <= sh.lastTick {
		return // woken early: no new tick
	}
	c := &sh.h.counts
	c[cTicks]++
	if sh.slept {
		c[cTicksSkipped] += target - sh.lastTick - 1
	}
	sh.lastTick = target
	if sh.cfg.Stats && sh.timed && target >= sh.wakeTick {
		sh.stats.tickLag.Record(int64(now - sh.tickTime(sh.wakeTick)))
	}
}

// recordPass accounts for the work of the pass that started at clock
// reading start. Shard goroutine, holding the wheel.
func (sh *Shard) recordPass(start time.Duration) {
	c, w := &sh.h.counts, sh.work
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
