package shard

import "time"

// transfer moves new timers from the lanes' queues into the wheel, at most
// TransferCap per tick; the rest wait in the queues for the next tick.
//
// It takes the batch first and reads the clock second: every node it took
// was pushed (and its Schedule call began) before the reading, so resolving
// deadline = reading + delay is never early. The batch is chained through
// the nodes' Next fields, which are free while a node is not in the wheel.
func (sh *Shard) transfer(target uint64) {
	if target != sh.capTick {
		sh.capTick, sh.capUsed = target, 0
	}
	budget := sh.cfg.TransferCap - sh.capUsed
	var first, last uint32
	total := 0
	for i := range sh.lanes {
		j := (sh.rr + i) & sh.laneMask
		q := &sh.lanes[j].queue
		for total < budget {
			idx, ok := q.TryPop(sh.arena)
			if !ok {
				break
			}
			if last == 0 {
				first = idx
			} else {
				sh.arena.Node(last).Next = idx
			}
			last = idx
			total++
		}
	}
	if total == 0 {
		return
	}
	sh.arena.Node(last).Next = 0
	sh.rr++
	c := &sh.stats.counts
	sh.capUsed += total
	c[cConsumed] += uint64(total)
	c[cTransferLast] = uint64(sh.capUsed)
	c[cTransferPeak] = max(c[cTransferPeak], uint64(sh.capUsed))
	if sh.capUsed == sh.cfg.TransferCap {
		c[cCapHits]++
	}
	c[cRingPeak] = max(c[cRingPeak], sh.queued()+uint64(total))
	now := sh.clock.Now()
	for idx := first; idx != 0; {
		n := sh.arena.Node(idx)
		next := n.Next
		n.Next = 0
		sh.accept(idx, now)
		idx = next
	}
}

// queued returns how many pushes the worker has not consumed yet.
func (sh *Shard) queued() uint64 {
	var pushed uint64
	for i := range sh.lanes {
		pushed += sh.lanes[i].scheduled.Load() + sh.lanes[i].undone.Load()
	}
	return pushed - min(sh.stats.counts[cConsumed], pushed)
}

// accept files a node taken off a queue, resolving its deadline from now if
// it has none yet.
func (sh *Shard) accept(idx uint32, now time.Duration) {
	n := sh.arena.Node(idx)
	for {
		s := state(n.State.Load())
		switch s.status() {
		case statusUnresolved:
			ns, ok := resolve(n, s, sh.deadlineTick(s, now))
			if !ok {
				continue // cancelled or reset meanwhile
			}
			sh.file(idx, ns)
		case statusPending:
			sh.file(idx, s) // a Reset resolved it already
		default:
			// Cancelled before it reached the wheel (fired needs the
			// wheel, so it cannot be). Freed to the lane of its index,
			// which spreads such nodes over the lanes.
			if s.status() != statusCancelled {
				badNode(idx, s, "fired before it was filed")
			}
			sh.releaseNode(idx, n, s)
		}
		return
	}
}

// file inserts a pending node at its deadline, or at the next tick if that
// has passed (delay <= 0, or a Reset that is already due).
func (sh *Shard) file(idx uint32, s state) {
	t := max(unwrapTicks(s.ticks38(), sh.w.elapsed), sh.w.elapsed+1)
	sh.w.insert(idx, t)
}
