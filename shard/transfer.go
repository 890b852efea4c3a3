package shard

// transfer moves new timers from the lanes' queues into the wheel, at most
// TransferCap per tick and budget in this pass; the rest wait in the
// queues, none lost. It reports whether it stopped for the pass budget
// alone, with timers waiting and the tick's cap not reached: the worker
// then passes again at once, after it has run what is due.
func (sh *Shard) transfer(target uint64, budget int) (more bool) {
	if target != sh.capTick {
		sh.capTick, sh.capUsed = target, 0
	}
	capLeft := sh.cfg.TransferCap - sh.capUsed
	limit := min(budget, capLeft)
	total := 0
	for i := range sh.lanes {
		j := (sh.rr + i) & sh.laneMask
		q := &sh.lanes[j].queue
		for total < limit {
			idx, ok := q.TryPop(sh.arena)
			if !ok {
				break
			}
			sh.accept(idx, j)
			total++
		}
	}
	more = total == limit && limit < capLeft && !sh.queuesEmpty()
	if total == 0 {
		return more
	}
	sh.rr++
	sh.work.transferred += total
	c := &sh.stats.counts
	sh.capUsed += total
	c[cConsumed] += uint64(total)
	c[cTransferLast] = uint64(sh.capUsed)
	c[cTransferPeak] = max(c[cTransferPeak], uint64(sh.capUsed))
	if sh.capUsed == sh.cfg.TransferCap {
		c[cCapHits]++
	}
	c[cQueuedPeak] = max(c[cQueuedPeak], sh.queued()+uint64(total))
	return more
}

// queued returns how many pushes the worker has not consumed yet.
func (sh *Shard) queued() uint64 {
	var pushed uint64
	for i := range sh.lanes {
		pushed += sh.lanes[i].pushed()
	}
	return pushed - min(sh.stats.counts[cConsumed], pushed)
}

// pushed returns the number of nodes pushed on the lane's queue that stay
// there until the worker takes them: Schedules accepted or undone, less
// those taken back. A node can be taken back before its Schedule call
// counts it, so the result is clamped at 0.
func (l *lane) pushed() uint64 {
	p := l.scheduled.Load() + l.undone.Load()
	return p - min(l.reclaimed.Load(), p)
}

// accept files a node taken off lane's queue.
func (sh *Shard) accept(idx uint32, lane int) {
	n := sh.arena.Node(idx)
	for {
		s := state(n.State.Load())
		switch s.status() {
		case statusNew:
			ns, ok := settle(n, s)
			if !ok {
				continue // cancelled or reset meanwhile
			}
			sh.file(idx, ns)
		case statusPending:
			badNode(idx, s, "filed while still in its queue")
		default:
			// Cancelled before it reached the wheel (fired needs the
			// wheel, so it cannot be). Back to the lane it came from:
			// the producer there, which likely cancelled it, will
			// want a node again soon, and taking it from its own free
			// list keeps it off the other lanes' list heads.
			if s.status() != statusCancelled {
				badNode(idx, s, "fired before it was filed")
			}
			sh.releaseNode(idx, n, s, lane)
		}
		return
	}
}

// file inserts a pending node at its deadline tick. One whose tick the
// worker has processed already (delay <= 0, an earlier Reset, or a timer a
// budget-limited pass left in its queue while advance went on) is due now:
// it runs at the start of this pass's advance, never early, since the clock
// has reached that tick.
func (sh *Shard) file(idx uint32, s state) {
	if t := unwrapTicks(s.ticks38(), sh.w.elapsed); t > sh.w.elapsed {
		sh.w.insert(idx, t)
	} else {
		sh.w.insertDue(idx)
	}
}
