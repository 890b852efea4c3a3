package shard

import (
	"math"
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
	Wakeups       uint64
	Refiled       uint64
	RefiledPeak   int
	HeldCancelled int
	Sweeps        uint64
	Swept         uint64
	SlowestPass   PassWork
	// Recent holds the peaks of the passes of the last RecentWindow
	// (see recentSlots), and Now the clock's reading when the snapshot
	// was taken, on which PassWork.End is read.
	Recent Recent
	Now    time.Duration
	Panics uint64
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
	// BlockedRuns counts the runners the shard left behind a task that
	// ran past BlockedAfter, BlockedRefused the looks the MaxBlocked
	// bound refused, and Blocked lists the tasks of those runners that
	// have not returned (runner.go); Longest is the one that ran
	// longest of those that have returned (Ran set), if any.
	BlockedRuns    uint64
	BlockedRefused uint64
	Blocked        []BlockedTask
	Longest        BlockedTask
	TickLag        hist.Snapshot
	Lateness       hist.Snapshot
	PassTime       hist.Snapshot
	TaskTime       hist.Snapshot
}

// publishEvery: a holder publishes its count of timers filed at once every
// 2^20 of them, so that the published count stays within own's 30 bits of
// the true one (see scheduledNow) whoever else publishes or not.
const publishEvery = 1<<20 - 1

// Holder counters: kept in the plain array holder.counts by whoever holds
// the wheel, and copied to an atomic array (publish) by the shard
// goroutine after each pass (a reader nudges an idle goroutine into one),
// so that counting costs the hot path no atomic operation.
const (
	cScheduled      = iota // timers filed at once by a holding producer
	cFired                 // tasks started
	cConsumed              // nodes taken from the queue
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
	cSlowNs                // the slowest pass: duration, work and end
	cSlowTransferred
	cSlowRefiled
	cSlowCascaded
	cSlowFired
	cSlowEnd
	cPeriodicRuns   // runs of periodic timers' tasks (not in cFired)
	cWakeups        // sleeps of the shard goroutine that ended (copied from Shard.wakeups)
	cBlocksReleased // big blocks given back (reserve.go)
	cBlocksRemade   // released big blocks made again
	cCrossed        // routed timers handed over to their key's shard
	cProxied        // proxies other shards crossed here, taken in
	cFreed          // nodes freed (freeSlot), cancelled or not
	cBlockedRuns    // runners left behind a blocked task (runner.go)
	numCounters
)

// publishedStats is the shard goroutine's side of Stats: it records the
// histograms, which anyone may snapshot (the runners keep the tasks':
// runner.go); published is the holder counters' atomic copy, written by holders (see
// publish) and read by anyone.
type publishedStats struct {
	published [numCounters]atomic.Uint64
	// gauges holds the nodes in use (nodesInUse) in its high half and
	// the cancelled timers whose nodes are still held (heldCancelled) in
	// its low half, as of one pass: one word, so that a reader never
	// pairs two passes' figures. Written by publish.
	gauges atomic.Uint64
	// scheduledSeen is the most Scheduled that Stats has reported
	// (reportScheduled): written by readers only.
	scheduledSeen atomic.Uint64
	tickLag       hist.Histogram
	passTime      hist.Histogram
	recent        [recentSlots]recentSlot
}

// publish copies the holder's counters for readers. Holder only.
func (sh *Shard) publish() {
	sh.assertHolder()
	sh.wrote(lineGoroutine)
	c := &sh.h.counts
	// Held first: a Cancel it counts follows its timer's Schedule, which
	// nodesInUse, reading the lanes after it, counts too. So HeldCancelled
	// never reads above Resident. (Both are below 2^32: a shard holds at
	// most pool.Capacity nodes.)
	held := sh.heldCancelled()
	sh.stats.gauges.Store(sh.nodesInUse()<<32 | min(held, math.MaxUint32))
	for i, v := range c {
		if sh.stats.published[i].Load() != v {
			sh.stats.published[i].Store(v)
		}
	}
}

// nodesInUse returns the nodes of the shard's arena that hold a timer
// (pending, or ended and not freed yet: in the wheel, in a queue, handed to
// another shard, waiting for Config.Unindex) or a proxy of another shard's
// timer: the nodes taken, by holders (counted at once), by producers that
// pushed them on the queue (their lanes' counts) and as proxies taken in,
// less those freed. Holder only.
func (sh *Shard) nodesInUse() uint64 {
	sh.assertHolder()
	c := &sh.h.counts
	taken := c[cScheduled] + c[cProxied]
	for i := range sh.lanes {
		taken += sh.lanes[i].queued.Load()
	}
	return taken - min(taken, c[cFreed])
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
		sh.wrote(lineGoroutine)
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
	var st Stats
	// The recent peaks first: the goroutine raises them after it has
	// published the peaks since the start, so Recent never reads above
	// them.
	st.Now = sh.clock.Now()
	st.Recent = sh.recentPeaks(st.Now)
	p := &sh.stats.published
	l := sh.sumLanes()
	consumed := p[cConsumed].Load()
	// A node can be consumed before its Schedule call counts it, so the
	// depth is clamped at 0.
	st.Queued = int(l.queued - min(consumed, l.queued))
	st.Scheduled = sh.reportScheduled(sh.scheduledNow(l))
	st.Cancelled = l.cancels
	st.Reset = l.resets
	g := sh.stats.gauges.Load()
	st.Resident, st.HeldCancelled = int(g>>32), int(uint32(g))
	st.Fired = p[cFired].Load() + sh.crossedFired.Load()
	st.Crossed = p[cCrossed].Load()
	st.TakenBack = p[cTakenBack].Load()
	st.Stopped = sh.stopped.Load()
	st.Sweeps = p[cSweeps].Load()
	st.Swept = p[cSwept].Load()
	st.QueuedPeak = int(p[cQueuedPeak].Load())
	st.TransferLast = int(p[cTransferLast].Load())
	st.TransferPeak = int(p[cTransferPeak].Load())
	st.CapHits = p[cCapHits].Load()
	st.Ticks = p[cTicks].Load()
	st.TicksSkipped = p[cTicksSkipped].Load()
	st.Wakeups = p[cWakeups].Load()
	st.Refiled = p[cRefiled].Load()
	st.RefiledPeak = int(p[cRefiledPeak].Load())
	st.SlowestPass = PassWork{
		Duration:    time.Duration(p[cSlowNs].Load()),
		Transferred: int(p[cSlowTransferred].Load()),
		Refiled:     int(p[cSlowRefiled].Load()),
		Cascaded:    int(p[cSlowCascaded].Load()),
		Fired:       int(p[cSlowFired].Load()),
		End:         time.Duration(p[cSlowEnd].Load()),
	}
	st.Panics = p[cPanics].Load()
	st.PeriodicRuns = p[cPeriodicRuns].Load()
	st.PeriodicMissed = l.missed
	st.NodesAllocated, st.NodesReleased = sh.arena.Footprint()
	st.BlocksReleased = p[cBlocksReleased].Load()
	st.BlocksRemade = p[cBlocksRemade].Load()
	st.BlockedRuns = p[cBlockedRuns].Load()
	st.BlockedRefused = sh.refused.Load()
	st.Blocked, st.Longest = sh.Blocked()
	st.TickLag = sh.stats.tickLag.Snapshot()
	st.PassTime = sh.stats.passTime.Snapshot()
	for r := sh.runners.Load(); r != nil; r = r.all {
		st.Lateness.Merge(r.late.Snapshot())
		st.TaskTime.Merge(r.took.Snapshot())
	}
	return st
}
