package shard

import "github.com/shardwheel/shardwheel/pool"

// The sweep. A Cancel only marks its timer's node; the holder frees the
// node when it meets it: in its slot, when a cascade moves it, or here.
// A request timeout is typically cancelled milliseconds after it was
// scheduled and would wait in the wheel for its whole delay: the sweep
// bounds how many such nodes a shard holds, as the Go runtime bounds its
// timer heaps' zombies.
//
// A sweep starts when the wheel's linked nodes reach sweeper.at, a third
// more than it held when the last sweep ended (at least minSweep), or when
// the shard goroutine finds cancelled nodes held beyond a quarter of the
// linked ones and a 64th of the nodes a sweep visits (sweptNodes: the nodes
// of the arena's blocks still made; a sweep visits them all, so a smaller
// harvest is not worth it): growth catches the churn of a busy wheel, the
// share a wheel whose timers were cancelled en masse with nothing filed
// after. It then walks the arena in index order (stepping over the blocks
// given back after a spike, which link no node), a few nodes for every
// timer filed (sweepPerFiled, in steps of sweepStep), or sweepPerPass per
// pass of the shard goroutine when nothing was filed since its last pass,
// unlinking and freeing every cancelled node it finds linked. The walk is
// sequential memory, so a node costs a few nanoseconds; and as each step is
// short, the holder, pinned for it, never holds off a garbage collection's
// stop-the-world for long. Once the walk reaches the end of the arena the
// sweep ends and sets the next threshold.
//
// Bound: a sweep starts with at most a third of the linked count of the
// previous sweep's end (plus minSweep) cancelled nodes held, and it
// visits every node before 1/sweepPerFiled of the arena's nodes more are
// filed, so the nodes held never exceed about half the live timers plus
// minSweep, and the sweep costs each filed timer sweepPerFiled node visits.

// sweeper is the sweep's state, the holder's.
type sweeper struct {
	min    int    // minSweep, lowered by tests that want sweeps at small sizes
	at     int    // linked nodes at which the next sweep starts
	next   uint32 // the next node index to look at; 0 while no sweep runs
	rate   int    // node visits each filed timer pays for in this sweep
	credit int    // node visits earned by filing and not spent yet
	// filed counts the timers filed since the shard goroutine's last
	// pass. While timers are being filed their filers pay the sweep, and
	// the goroutine leaves it to them: it may run on another P than the
	// wheel's, and the nodes a sweep frees are the ones the wheel's P
	// reuses next, so freeing them there would hand each to the next
	// Schedule in another core's cache.
	filed int
}

const (
	// minSweep is the fewest linked nodes that start a sweep: a small
	// wheel is not worth sweeping, its slots come round soon enough.
	minSweep = 4096
	// sweepPerFiled is the fewest node visits each filed timer pays for
	// while a sweep runs; more when the arena is larger than the wheel's
	// growth allowance (see paceSweep).
	sweepPerFiled = 4
	// sweepStep is how many nodes one step visits: tens of microseconds,
	// long enough for the walk to stream through memory, short enough
	// that a stop-the-world never waits long for a pinned holder.
	sweepStep = 4096
	// sweepPerPass is the node visits a pass of the shard goroutine adds,
	// so that a sweep ends even when nothing is filed.
	sweepPerPass = sweepStep
)

// paceSweep starts a sweep when the wheel has grown enough, and pays n
// filed timers' share of a running one. Holder only.
func (sh *Shard) paceSweep(n int) {
	sh.assertHolder()
	sw := &sh.h.sweep
	sw.filed += n
	if sw.next == 0 {
		if sh.h.w.count < sw.at {
			return
		}
		sh.startSweep()
	}
	sw.credit += n * sw.rate
	for sw.credit >= sweepStep && sw.next != 0 {
		sw.credit -= sweepStep
		sh.sweep(sweepStep)
	}
}

// startSweep starts a sweep. It visits the whole arena within the filings
// the next sweep's threshold allows, so that a sweep ends before the next
// one is due: held nodes stay within that allowance however large the
// arena grew. Holder only.
func (sh *Shard) startSweep() {
	sh.assertHolder()
	sw := &sh.h.sweep
	span := max(sh.h.w.count/3, sw.min)
	sw.next, sw.credit = 1, 0
	sw.rate = max(sweepPerFiled, (int(sh.sweptNodes())+span-1)/span)
}

// sweepHeld starts a sweep if the wheel holds more cancelled nodes than a
// quarter of its linked ones and a 64th of its arena, or, when nothing is
// being filed, any that pin blocks being given back (sweepToShed), and
// visits step nodes of a running sweep when no timer was filed since the
// last pass: the shard goroutine's part. While a sweep runs the goroutine
// passes at least every housekeepEvery, each such pass a larger step
// (ahead.go), so a wheel whose timers were all cancelled is swept within
// about a second once filing stops, waking a few times for it.
func (sh *Shard) sweepHeld(step int) {
	sw := &sh.h.sweep
	filing := sw.filed > 0
	sw.filed = 0
	if filing && sw.next != 0 {
		return // the filers pay it, on the wheel's P (see sweeper.filed)
	}
	if sw.next == 0 {
		if !sh.sweepDue() && (filing || !sh.sweepToShed()) {
			return
		}
		sh.startSweep()
	}
	sh.sweep(step)
	// A sweep that ended while Cancels went on behind it may leave enough
	// for another: start it now, while plan can still see it, or the
	// goroutine would sleep until the nodes' slots come round.
	if sw.next == 0 && sh.sweepDue() {
		sh.startSweep()
	}
}

// reclaim is the last resort of a Schedule that finds the arena full: if
// the wheel holds cancelled nodes, it sweeps a step (starting a sweep if
// none runs) and takes a node it freed. A full arena's Schedules so find
// the nodes of timers cancelled at capacity, a step per call, never more
// work than a step's. Holder only.
func (sh *Shard) reclaim() (uint32, pool.Slot, bool) {
	sh.assertHolder()
	if sh.heldCancelled() == 0 {
		return 0, pool.Slot{}, false
	}
	if sh.h.sweep.next == 0 {
		sh.startSweep()
	}
	sh.sweep(sweepStep)
	return sh.takeFree()
}

// sweepDue reports whether the wheel holds more cancelled nodes than a
// quarter of its linked ones and a 64th of its arena. Holder only.
func (sh *Shard) sweepDue() bool {
	sh.assertHolder()
	held := sh.heldCancelled()
	return held > 0 && held > max(uint64(sh.h.w.count/4), sh.sweptNodes()/64)
}

// sweptNodes returns how many nodes a sweep visits: those of the arena's
// blocks below its high-water mark, less the blocks given back, which the
// walk steps over. Holder only.
func (sh *Shard) sweptNodes() uint64 {
	sh.assertHolder()
	allocated, _ := sh.arena.Footprint()
	return min(allocated, uint64(sh.arena.HighWater()))
}

// heldCancelled returns the cancelled timers whose nodes the shard has not
// freed yet: in the wheel or in the queue. Holder only.
func (sh *Shard) heldCancelled() uint64 {
	sh.assertHolder()
	var held uint64
	for i := range sh.lanes {
		held += sh.lanes[i].cancels.Load() + sh.lanes[i].undone.Load()
	}
	return held - min(held, sh.h.counts[cFreedCancelled])
}

// sweep visits up to k nodes of a running sweep, freeing the cancelled ones
// linked in the wheel, and ends the sweep when it reaches the arena's end.
// Holder only.
func (sh *Shard) sweep(k int) {
	sh.assertHolder()
	sw := &sh.h.sweep
	if sw.next == 0 {
		return
	}
	w := sh.h.w
	hw := sh.arena.HighWater()
	var swept uint64
	for k > 0 && sw.next < hw {
		base, m := sh.arena.Span(sw.next)
		m = min(m, int(hw-sw.next))
		if !base.Installed() {
			// A block given back (or never made) links no node: the walk
			// steps over it for free, or after a spike it would spend the
			// filers' credit on nothing while cancelled nodes pile up.
			sw.next += uint32(m)
			continue
		}
		m = min(m, k)
		nodes := base.Nodes(m)
		for i := range nodes {
			n := &nodes[i]
			if !inWheel(n.Prev) {
				continue
			}
			s := state(n.State.Load())
			if s.status() != statusCancelled || s.queued() {
				continue
			}
			idx := sw.next + uint32(i)
			w.unlinkNode(idx, n)
			sh.freeSlot(idx, n, s, base.At(i))
			swept++
		}
		sw.next += uint32(m)
		k -= m
	}
	sh.h.counts[cSwept] += swept
	if sw.next >= hw {
		sw.next = 0
		sw.at = w.count + max(w.count/3, sw.min)
		sh.h.counts[cSweeps]++
	}
}
