package shard

import (
	"context"
	"runtime/trace"
	"strconv"
	"sync/atomic"
	"time"
)

// What the shard goroutine records of its passes: their work and time,
// the slowest, tick lag, and the peaks of the last minute.

// PassWork describes one pass of a shard goroutine.
type PassWork struct {
	// Duration is how long the pass took (zero with Stats off).
	Duration time.Duration
	// Transferred, Refiled and Fired count the new timers it moved into
	// the wheel, the timers it moved within the wheel, and the tasks it
	// handed to the runner; Cascaded is the part of Refiled that
	// cascades moved.
	Transferred int
	Refiled     int
	Cascaded    int
	Fired       int
	// End is the clock reading at the pass's end (with Stats off, at its
	// start: passes are not timed then).
	End time.Duration
}

// slower reports whether p is a slower pass than q: it took longer, or
// as long (every pass takes 0 with Stats off) and did more.
func (p PassWork) slower(q PassWork) bool {
	return p.Duration > q.Duration ||
		p.Duration == q.Duration && p.Transferred+p.Refiled+p.Fired > q.Transferred+q.Refiled+q.Fired
}

// passWork is the shard goroutine's tally of the current pass: besides
// PassWork's counts, filed is the timers it filed again that were not new
// (Resets found on the attention stack, periodic timers after a run),
// which the execution tracer shows (tracedPass); queuedPeak the most new
// timers its transfer found in the queue.
type passWork struct {
	transferred, refiled, fired, cascaded, filed int
	queuedPeak                                   uint64 // see transfer
}

// Recent peaks. SlowestPass and the peaks since the shard started only
// rise: after one incident they cannot show the next. Stats.Recent holds
// the same figures for the passes of the last minute, kept by the shard
// goroutine in a ring of one slot per second of its clock; a reader takes
// the maximum over the slots of the current second and the recentSlots-1
// before it, so that a peak leaves Recent between RecentWindow and
// RecentWindow plus a second after its pass started.

// RecentWindow is the span of Stats.Recent, to the second: the passes
// that started in the current second of the shard's clock or in the 60
// before it.
const RecentWindow = time.Minute

// recentSlots is the number of one-second slots the ring keeps: those of
// RecentWindow and the current one.
const recentSlots = int64(RecentWindow/time.Second) + 1

// Recent is the peaks of the passes of the last RecentWindow.
type Recent struct {
	// SlowestPass is the slowest of those passes, as Stats.SlowestPass
	// is of all.
	SlowestPass PassWork
	// QueuedPeak is the most new timers one of those passes found in the
	// queue (the timers it took in and those it left waiting), and
	// TransferPeak the most new timers moved into the wheel in one tick
	// as the passes of that tick left the count: a producer's transfer
	// after the last pass of a tick counts in Stats.TransferPeak only.
	QueuedPeak   int
	TransferPeak int
	// RefiledPeak is the most timers one of those passes moved within
	// the wheel.
	RefiledPeak int
}

// recentSlot is one second's peaks. epoch is the second (the clock
// reading over a second, plus 1) whose passes the slot holds, 0 while it
// is being cleared for a new one; the shard goroutine writes the slot,
// readers take it if epoch reads the same before and after its fields.
type recentSlot struct {
	epoch                             atomic.Int64
	slowNs, slowEnd                   atomic.Int64
	slowTransferred, slowRefiled      atomic.Int64
	slowCascaded, slowFired           atomic.Int64
	queuedPeak, transferPeak, refiled atomic.Int64
}

// epochOf returns the ring's second of clock reading t.
func epochOf(t time.Duration) int64 { return int64(t/time.Second) + 1 }

// pass returns the slot's slowest pass.
func (sl *recentSlot) pass() PassWork {
	return PassWork{
		Duration:    time.Duration(sl.slowNs.Load()),
		Transferred: int(sl.slowTransferred.Load()),
		Refiled:     int(sl.slowRefiled.Load()),
		Cascaded:    int(sl.slowCascaded.Load()),
		Fired:       int(sl.slowFired.Load()),
		End:         time.Duration(sl.slowEnd.Load()),
	}
}

// recordRecent adds the pass recordPass recorded last, which started at
// clock reading start, to the ring: after publish, so that a peak of the
// ring is never above its counterpart since the start as published (see
// Stats). Shard goroutine, holding the wheel.
func (sh *Shard) recordRecent(start time.Duration) {
	p := sh.lastPass
	e := epochOf(start)
	sl := &sh.stats.recent[e%recentSlots]
	if sl.epoch.Load() != e {
		sl.epoch.Store(0)
		for _, v := range []*atomic.Int64{
			&sl.slowNs, &sl.slowEnd, &sl.slowTransferred, &sl.slowRefiled,
			&sl.slowCascaded, &sl.slowFired, &sl.queuedPeak, &sl.transferPeak, &sl.refiled,
		} {
			v.Store(0)
		}
		sl.epoch.Store(e)
	}
	if p.slower(sl.pass()) {
		sl.slowNs.Store(int64(p.Duration))
		sl.slowEnd.Store(int64(p.End))
		sl.slowTransferred.Store(int64(p.Transferred))
		sl.slowRefiled.Store(int64(p.Refiled))
		sl.slowCascaded.Store(int64(p.Cascaded))
		sl.slowFired.Store(int64(p.Fired))
	}
	raise := func(v *atomic.Int64, n int64) {
		if n > v.Load() {
			v.Store(n)
		}
	}
	raise(&sl.refiled, int64(p.Refiled))
	raise(&sl.queuedPeak, int64(sh.work.queuedPeak))
	if sh.h.capTick == sh.h.tick {
		raise(&sl.transferPeak, int64(sh.h.capUsed))
	}
}

// recentPeaks returns the peaks of the ring's slots of the second of
// clock reading now and the recentSlots-1 before it; a slot of a later
// second (a pass that started after now was read) counts too. Any
// goroutine; it never waits for the shard goroutine, and reads a slot
// again only if that goroutine cleared it meanwhile, which it does once
// a second.
func (sh *Shard) recentPeaks(now time.Duration) Recent {
	cur := epochOf(now)
	var r Recent
	for i := range sh.stats.recent {
		sl := &sh.stats.recent[i]
		for {
			e := sl.epoch.Load()
			if e == 0 || cur-e >= recentSlots {
				break // unused, being cleared, or too old
			}
			p := sl.pass()
			q, t, f := sl.queuedPeak.Load(), sl.transferPeak.Load(), sl.refiled.Load()
			if sl.epoch.Load() != e {
				continue // cleared for a new second meanwhile
			}
			if p.slower(r.SlowestPass) {
				r.SlowestPass = p
			}
			r.QueuedPeak = max(r.QueuedPeak, int(q))
			r.TransferPeak = max(r.TransferPeak, int(t))
			r.RefiledPeak = max(r.RefiledPeak, int(f))
			break
		}
	}
	return r
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
// reading start: the pass's time, the slowest pass, and the
// recent peaks. Shard goroutine, holding the wheel.
func (sh *Shard) recordPass(start time.Duration) {
	c, w := &sh.h.counts, sh.work
	c[cRefiledPeak] = max(c[cRefiledPeak], uint64(w.refiled))
	p := PassWork{
		Transferred: w.transferred, Refiled: w.refiled, Cascaded: w.cascaded, Fired: w.fired, End: start,
	}
	if sh.cfg.Stats {
		p.End = sh.clock.Now()
		p.Duration = p.End - start
		sh.stats.passTime.Record(int64(p.Duration))
	}
	sh.lastPass = p
	slowest := PassWork{
		Duration: time.Duration(c[cSlowNs]), Transferred: int(c[cSlowTransferred]), Refiled: int(c[cSlowRefiled]), Fired: int(c[cSlowFired]),
	}
	if p.slower(slowest) {
		c[cSlowNs], c[cSlowEnd] = uint64(p.Duration), uint64(p.End)
		c[cSlowTransferred], c[cSlowRefiled], c[cSlowCascaded], c[cSlowFired] =
			uint64(p.Transferred), uint64(p.Refiled), uint64(p.Cascaded), uint64(p.Fired)
	}
}

// Passes in the execution tracer.
//
// Operators read tick lag off go tool trace as well as off Stats: a late
// tick shows on the trace's timeline next to the goroutine that held the
// CPU meanwhile. While tracing is on (runtime/trace.IsEnabled), each pass
// of a shard goroutine is a region of type RegionPass, and logs, in it,
// the shard's number (category LogShard) and what the pass did (category
// LogWork):
//
//	taken_in  new timers it moved from the queue into the wheel
//	filed     timers it filed again that were not new: periodic timers
//	          after a run, Resets it took off the attention stack
//	fired     tasks it handed to the runner (periodic runs included)
//	refiled   timers it moved within the wheel, cascades aside: Resets
//	          found at their old slot or taken off the attention stack
//	cascaded  timers cascades moved down the wheel
//
// With tracing off a pass costs one more atomic load (trace.IsEnabled),
// which BenchmarkPassTracingOff measures.

// Names of what the shard puts in an execution trace.
const (
	RegionPass = "shardwheel.pass"
	LogShard   = "shardwheel.shard"
	LogWork    = "shardwheel.work"
)

// tracer is what a shard goroutine keeps for the tracer: the shard's
// number as the message of its LogShard entries, made at the first traced
// pass. The shard goroutine's.
type tracer struct{ shard string }

// tracedPass is pass as a region of the execution trace.
func (sh *Shard) tracedPass() {
	ctx := context.Background()
	region := trace.StartRegion(ctx, RegionPass)
	defer region.End()
	if sh.trace.shard == "" {
		sh.trace.shard = strconv.Itoa(sh.id)
	}
	trace.Log(ctx, LogShard, sh.trace.shard)
	sh.passBody()
	w := sh.work
	b := make([]byte, 0, 128)
	b = append(b, "taken_in="...)
	b = strconv.AppendInt(b, int64(w.transferred), 10)
	b = append(b, " filed="...)
	b = strconv.AppendInt(b, int64(w.filed), 10)
	b = append(b, " fired="...)
	b = strconv.AppendInt(b, int64(w.fired), 10)
	b = append(b, " refiled="...)
	b = strconv.AppendInt(b, int64(w.refiled-w.cascaded), 10)
	b = append(b, " cascaded="...)
	b = strconv.AppendInt(b, int64(w.cascaded), 10)
	trace.Log(ctx, LogWork, string(b))
}
