package shard

import (
	"fmt"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// # The node state machine
//
// A node's state word is one 64-bit value, changed by CAS (and by the plain
// stores noted below, made by the one goroutine that owns the node then):
//
//	bits 63..44  tag      low 20 bits of the node's generation
//	bit  43      routed   a timer with a key, run on its key's shard (cross.go)
//	bit  42      indexed  an Index's timer: its Index must hear of its end
//	bit  41      queued   the node is on the attention stack
//	bits 40..38  status   new, pending, fired, cancelling, cancelled, stopped, running, handed
//	bits 37..0   ticks    deadline tick modulo 2^38
//
// The producer computes the deadline tick from its own clock reading when
// it schedules, as Netty, Go's runtime and tokio do: a deadline is anchored
// at the call, however late the wheel files the timer.
//
// The statuses, and who moves a node into each:
//
//	new         in the shard's queue (a proxy: on its        producer's store
//	            attention queue), not yet in the wheel
//	pending     in the wheel (or being linked by its holder) producer's store, or settle
//	fired       its task has started (or is about to)        fire, shard goroutine
//	cancelling  a Cancel won and is dropping the task        cancel, any goroutine
//	cancelled   ended by Cancel, or a Schedule undone by Stop  the same Cancel
//	stopped     claimed by Stop                              claim, Stop's goroutine
//	running     a periodic timer's task is running, or its   begin, shard goroutine
//	            executor has it: the series lives on
//	handed      a routed timer, out of its wheel, that the   cross, its wheel's holder
//	            shard its key routes to runs (cross.go)
//
// new, pending, running and handed are live: Pending reports them, Cancel,
// Reset and Stop act on them. The others are terminal for a generation: the
// status never changes again, except cancelling, which its own Cancel
// moves to cancelled a few instructions later. Only a periodic timer
// (periodic.go) is ever running, and it leaves running for pending again
// when its run has returned (rearm), unless a Cancel or Stop ended it
// meanwhile: one node serves the whole series.
//
// Whoever ended the timer by CAS owns its task from then on
// (pool.Arena.Task): the shard goroutine that fired it, the Cancel that
// cancelled it (which drops a closure at once, so that the garbage
// collector may take it), Stop for a timer it claimed. A running series'
// task belongs to its run, and stays the run's when a Cancel ends the
// series meanwhile: that Cancel drops nothing, and the holder that frees
// the node drops the task.
//
// Where a node is, the goroutine holding the wheel knows from Prev (0: not
// in the wheel; detached: out of the wheel but still on the attention
// stack, or a periodic timer whose executor has its task and which comes
// back by the attention stack; anything else: linked in a slot). Who frees
// a node, and when:
//
//	fired          the shard goroutine, after its task (or at once if queued: attention frees it)
//	cancelled      the holder that meets it: in its slot, in a cascade, in the
//	               sweep, in the queue, or the Cancel that takes it straight back
//	cancelling     nobody, until it is cancelled: a holder that meets one leaves it
//	stopped        nobody: Stop keeps its task for Timer.Task
//	running        nobody: its run re-files it, or frees it if it ended meanwhile
//	handed         nobody: the routed shard hands it back ended (cross.go)
//
// always only when it is in no list: not queued, not in the queue. A node
// is on at most one of the queue (new), the attention stack (queued) and a
// free list, which share its link (pool.Arena.Link).
//
// The tag makes a CAS from a stale handle fail even though the node was
// recycled: a handle's CAS expects the state word it loaded, and the rest
// of the node's 64-bit generation, its high part (pool.Node.Epoch, which
// startLife raises when the tag wraps), is checked after that load (see
// load), so a stale handle could only win if, between those two atomic
// loads and its CAS a few instructions later, the node lived a multiple
// of 2^20 further lives (a million schedule+cancel pairs, tens of
// milliseconds at the fastest) and the new life had the same status and
// deadline tick.
//
// indexedBit is written by the producer's store and kept by every
// transition but a cancel from CancelUnindexed, which clears it: the holder
// reads it when it frees the node, to call Config.Unindex (see freeNode).
const (
	ticksBits  = 38
	ticksMask  = 1<<ticksBits - 1
	statusShft = ticksBits
	statusMask = 7
	tagShift   = 44
	tagBits    = 64 - tagShift
	tagMask    = 1<<tagBits - 1

	// queuedBit marks a node that is on the attention stack.
	queuedBit = 1 << 41
	// indexedBit marks a timer that Config.Unindex must hear of when its
	// node is freed.
	indexedBit = 1 << 42
	// routedBit marks a routed timer (Request.Routed): its holders hand
	// it over to its key's shard when it comes near (cross.go).
	routedBit = 1 << 43
)

// Status values. new is what a producer writes for a node it queues.
const (
	statusNew = iota
	statusPending
	statusFired
	statusCancelling
	statusCancelled
	statusStopped
	statusRunning
	statusHanded
)

// maxDelayTicks bounds every deadline's distance from the wheel's elapsed
// tick so that 38-bit modular ticks compare unambiguously (|diff| < 2^37) and
// so that the wheel's top level never wraps onto a live slot.
const maxDelayTicks = 1 << 36

type state uint64

func makeState(gen uint64, status uint64, ticks uint64) state {
	return state(gen&tagMask<<tagShift | status<<statusShft | ticks&ticksMask)
}

func (s state) status() uint64  { return uint64(s) >> statusShft & statusMask }
func (s state) ticks38() uint64 { return uint64(s) & ticksMask }
func (s state) live() bool {
	st := s.status()
	return st <= statusPending || st >= statusRunning
}
func (s state) tagOK(g uint64) bool {
	return uint64(s)>>tagShift == g&tagMask
}

// queued reports whether the node is on the attention stack.
func (s state) queued() bool { return uint64(s)&queuedBit != 0 }

// routed reports whether the timer runs on its key's shard (cross.go).
func (s state) routed() bool { return uint64(s)&routedBit != 0 }

// indexed reports whether the node's key index must hear of its end.
func (s state) indexed() bool { return uint64(s)&indexedBit != 0 }

// to returns s moved to status; the flag bits stay as they were.
func (s state) to(status uint64) state {
	return state(uint64(s)&^(statusMask<<statusShft) | status<<statusShft)
}

func (s state) withTicks(ticks uint64) state {
	return state(uint64(s)&^ticksMask | ticks&ticksMask)
}

func (s state) withQueued(q bool) state {
	if q {
		return s | queuedBit
	}
	return s &^ queuedBit
}

// unwrapTicks returns the full tick whose low 38 bits are t38 and which lies
// within 2^37 of ref.
func unwrapTicks(t38, ref uint64) uint64 {
	diff := int64((t38-ref)<<(64-ticksBits)) >> (64 - ticksBits)
	return ref + uint64(diff)
}

// Transitions. Each is one CAS from the state s the caller loaded; false
// means another goroutine changed the state first, and the caller reloads.

// cancel moves a live timer to cancelling, clearing the bits in drop (0, or
// indexedBit). The caller must then drop the task and call endCancel. It
// asks for the attention queue (needsQueue) for a filed timer whose key
// index must hear of its end, so that a holder frees it, and tells the
// index, soon rather than when its slot comes round; and for a handed
// timer (cross.go), whose proxy the caller then pushes on its key's
// shard's attention queue, so that the proxy and the timer's node are
// freed now rather than at its deadline, maybe an hour away.
func cancel(n *pool.Node, s state, drop state) (ns state, ok, needsQueue bool) {
	stress.Point()
	ns = s.to(statusCancelling) &^ drop
	needsQueue = !s.queued() && (s.status() == statusPending && ns.indexed() || s.status() == statusHanded)
	ns = ns.withQueued(s.queued() || needsQueue)
	return ns, n.State.CompareAndSwap(uint64(s), uint64(ns)), needsQueue
}

// endCancel moves a node its caller cancelled from cancelling (state s,
// which cancel returned) to cancelled, keeping the queued bit, which the
// holder of the wheel may clear meanwhile. From here on the node may be
// freed.
func endCancel(n *pool.Node, s state) state {
	for {
		stress.Point()
		ns := s.to(statusCancelled)
		if n.State.CompareAndSwap(uint64(s), uint64(ns)) {
			return ns
		}
		s = state(n.State.Load())
	}
}

// reset gives a live timer the deadline tick t. It asks for the attention
// stack when the deadline moves earlier than where a pending node may be
// filed; a later deadline is found lazily when the old slot comes due.
func reset(n *pool.Node, s state, t uint64) (ok, needsQueue bool) {
	stress.Point()
	if s.status() == statusPending {
		needsQueue = t < unwrapTicks(s.ticks38(), t) && !s.queued()
	}
	ns := s.withTicks(t).withQueued(s.queued() || needsQueue)
	return n.State.CompareAndSwap(uint64(s), uint64(ns)), needsQueue
}

// settle marks a new timer as filed in the wheel, so that from now on an
// earlier Reset tells the holder. Holder only: settle has no Shard to
// assert it on, so its caller, accept, does (assertHolder).
func settle(n *pool.Node, s state) (state, bool) {
	stress.Point()
	ns := s.to(statusPending)
	return ns, n.State.CompareAndSwap(uint64(s), uint64(ns))
}

// fire moves a pending timer whose tick has come to fired. Shard goroutine
// only.
func fire(n *pool.Node, s state) (state, bool) {
	stress.Point()
	ns := s.to(statusFired)
	return ns, n.State.CompareAndSwap(uint64(s), uint64(ns))
}

// begin moves a pending periodic timer whose tick has come to running.
// Shard goroutine only.
func begin(n *pool.Node, s state) (state, bool) {
	stress.Point()
	ns := s.to(statusRunning)
	return ns, n.State.CompareAndSwap(uint64(s), uint64(ns))
}

// moveProxy moves a proxy (cross.go) from state ps to ns: the holder of
// the proxy's wheel is its only writer but for Drain, which may claim it
// (stopped) meanwhile. false means Drain claimed it: the proxy then stays
// out of every list, never freed, as every claimed node. Holder only.
func moveProxy(pn *pool.Node, ps, ns state) bool {
	stress.Point()
	return pn.State.CompareAndSwap(uint64(ps), uint64(ns))
}

// claim moves a live timer to stopped, for Stop.
func claim(n *pool.Node, s state) bool {
	stress.Point()
	return n.State.CompareAndSwap(uint64(s), uint64(s.to(statusStopped)))
}

// dequeue clears the queued bit of a node and returns the state it left:
// for the holder that took the node (or its proxy) off the attention
// queue, and for the Cancel of a handed timer that set the bit and found
// its proxy not yet settled (cancelHanded), which then pushes nothing.
func dequeue(n *pool.Node) state {
	for {
		stress.Point()
		s := state(n.State.Load())
		ns := s.withQueued(false)
		if n.State.CompareAndSwap(uint64(s), uint64(ns)) {
			return ns
		}
	}
}

// badNode reports a node in a state the holder can never legally see: the
// state machine is corrupt and continuing would lose or duplicate timers.
// Every corruption check ends here.
func badNode(idx uint32, s state, why string) {
	panic(fmt.Sprintf("shardwheel: corrupt timer node %d in status %d: %s", idx, s.status(), why))
}
