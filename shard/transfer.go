package shard

import (
	"math"
)

// transfer moves new timers from the queue into the wheel, at most
// TransferCap per tick and budget in this call; the rest wait in the
// queue, none lost. It reports whether it stopped for the budget alone,
// with timers waiting and the tick's cap not reached: the shard goroutine
// then passes again at once, after it has run what is due. A producer that
// leaves timers waiting wakes the shard goroutine to finish. Holder only.
func (sh *Shard) transfer(budget int) (more bool) {
	sh.assertHolder()
	if !sh.queue.Backlogged() && !sh.queue.Waiting() {
		return false
	}
	sh.wrote(lineQueue) // TryPop takes the producers' stack
	sh.wrote(lineBacklog)
	if tick := sh.h.tick; tick != sh.h.capTick {
		sh.h.capTick, sh.h.capUsed = tick, 0
	}
	capLeft := sh.cfg.TransferCap - sh.h.capUsed
	limit := min(budget, capLeft)
	total := 0
	first := uint64(math.MaxUint64) // the earliest deadline filed
	for total < limit {
		idx, ok := sh.queue.TryPop(sh.arena)
		if !ok {
			break
		}
		if t, filed := sh.accept(idx); filed {
			first = min(first, t)
		}
		total++
	}
	waiting := !sh.queue.Empty()
	more = total == limit && limit < capLeft && waiting
	if waiting && !sh.h.goroutine {
		sh.signal()
	}
	if total == 0 {
		return more
	}
	if sh.h.goroutine {
		sh.work.transferred += total
	}
	sh.wakeFor(first)
	c := &sh.h.counts
	sh.h.capUsed += total
	c[cConsumed] += uint64(total)
	c[cTransferLast] = uint64(sh.h.capUsed)
	c[cTransferPeak] = max(c[cTransferPeak], uint64(sh.h.capUsed))
	if sh.h.capUsed == sh.cfg.TransferCap {
		c[cCapHits]++
	}
	if sh.h.goroutine {
		// Producers do not sum the lanes' counters, which other cores
		// write: the shard goroutine's passes sample the peak, once, for
		// both QueuedPeak and the recent peak.
		q := sh.queuedNow() + uint64(total)
		sh.work.queuedPeak = max(sh.work.queuedPeak, q)
		c[cQueuedPeak] = max(c[cQueuedPeak], q)
	}
	sh.paceSweep(total)
	return more
}

// queuedNow returns how many pushes no holder has consumed yet. Holder only.
func (sh *Shard) queuedNow() uint64 {
	sh.assertHolder()
	var pushed uint64
	for i := range sh.lanes {
		pushed += sh.lanes[i].queued.Load()
	}
	return pushed - min(sh.h.counts[cConsumed], pushed)
}

// accept files a node taken off the queue and returns its deadline tick,
// or frees or sets it aside if its timer has ended meanwhile (filed false).
// Holder only.
func (sh *Shard) accept(idx uint32) (t uint64, filed bool) {
	sh.assertHolder()
	n := sh.arena.Node(idx)
	for {
		s := state(n.State.Load())
		switch s.status() {
		case statusNew:
			if rec := sh.seriesOf(idx); rec != nil {
				// A periodic timer: filed at its grid's next point,
				// which a Reset may have moved.
				sh.catchUp()
				ns, t := sh.seriesFileTick(rec, s)
				if !n.State.CompareAndSwap(uint64(s), uint64(ns.to(statusPending))) {
					continue
				}
				sh.file(idx, n, t)
				return t, true
			}
			ns, ok := settle(n, s)
			if !ok {
				continue // cancelled or reset meanwhile
			}
			t = sh.tickOf(ns)
			sh.fileOrCross(idx, n, ns, t)
			return t, true
		case statusCancelled:
			sh.freeNode(idx, n, s)
		case statusCancelling:
			// Its Cancel has not finished: file it as due, where the
			// next pass meets it cancelled (or files it again).
			sh.file(idx, n, sh.h.w.elapsed)
		case statusStopped:
			// Stop claimed it: it stays out of every list, never freed.
		default:
			badNode(idx, s, "pending or fired while still in the queue")
		}
		return 0, false
	}
}
