package shard

import "time"

// transferChunk is how many nodes transfer takes off the queues before it
// reads the clock and files them: small enough that their cache lines are
// still at hand when it files them, large enough that the clock read costs
// under a nanosecond a node.
const transferChunk = 64

// transfer moves new timers from the lanes' queues into the wheel, at most
// TransferCap per tick; the rest wait in the queues for the next tick.
//
// It takes a chunk of nodes first and reads the clock second: every node it
// took was pushed (and its Schedule call began) before the reading, so
// resolving deadline = reading + delay is never early.
func (sh *Shard) transfer(target uint64) {
	if target != sh.capTick {
		sh.capTick, sh.capUsed = target, 0
	}
	budget := sh.cfg.TransferCap - sh.capUsed
	var chunk [transferChunk]taken
	n, total := 0, 0
	for i := range sh.lanes {
		j := (sh.rr + i) & sh.laneMask
		q := &sh.lanes[j].queue
		for total+n < budget {
			idx, ok := q.TryPop(sh.arena)
			if !ok {
				break
			}
			chunk[n] = taken{idx, uint32(j)}
			if n++; n == transferChunk {
				sh.acceptChunk(chunk[:n])
				total, n = total+n, 0
			}
		}
	}
	sh.acceptChunk(chunk[:n])
	if total += n; total == 0 {
		return
	}
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
}

// acceptChunk files the nodes of chunk with a clock reading taken after
// they were taken off their queues.
func (sh *Shard) acceptChunk(chunk []taken) {
	if len(chunk) == 0 {
		return
	}
	now := sh.clock.Now()
	for _, t := range chunk {
		sh.accept(t.idx, now, int(t.lane))
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

// taken is a node transfer took off the queue of lane.
type taken struct{ idx, lane uint32 }

// accept files a node taken off lane's queue, resolving its deadline from
// now if it has none yet.
func (sh *Shard) accept(idx uint32, now time.Duration, lane int) {
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

// file inserts a pending node at its deadline, or at the next tick if that
// has passed (delay <= 0, or a Reset that is already due).
func (sh *Shard) file(idx uint32, s state) {
	t := max(unwrapTicks(s.ticks38(), sh.w.elapsed), sh.w.elapsed+1)
	sh.w.insert(idx, t)
}
