package main

import (
	"context"
	"iter"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shardwheel/shardwheel/internal/hist"
)

// Kinds of the requests that may time out, kept beside their handles.
const (
	kindStream     uint8 = iota // a stream request: not re-issued
	kindBackground              // re-issued as soon as it times out
)

// prefillChunk is how many timers prefill schedules between looks at its
// context and publications of its counts.
const prefillChunk = 4096

// maxBatch bounds how much overdue work one batch takes on, so that a
// worker that fell behind still notices the end of the run.
const maxBatch = 50 * time.Millisecond

// worker drives one share of the load against one implementation. Every
// field is the worker goroutine's own except those under mu, which tasks
// write, and n, which the coordinator reads.
type worker[H any] struct {
	impl  timers[H]
	clock clock
	id    uint64
	share Load // this worker's part: rates and counts divided by Workers

	// Separate random streams per purpose keep each sequence identical
	// across implementations even when timing changes how they interleave.
	reqRng, renewRng, connRng *rand.Rand
	seq                       uint64 // request ids issued

	// resp is a ring of per-millisecond buckets of requests awaiting their
	// response; respDone is the last millisecond whose bucket was answered.
	resp     [][]H
	respDone int64

	// slots holds the requests that time out; free lists the unused slots.
	slots []H
	kinds []uint8
	free  []int32
	owed  int // background requests that timed out and await re-issue

	conns     []H
	connTasks []func()
	// connDue is each connection's current idle deadline, read by its
	// task to compute lateness after any number of Resets.
	connDue []atomic.Int64

	// Pacing: requests and reads issued since the load started.
	issued, reads int64

	mu    sync.Mutex
	ran   []int32         // guarded by mu: slots whose task ran
	spare []int32         // the other buffer of ran, worker only
	late  *hist.Histogram // guarded by mu: lateness of every task run

	// c counts the worker's calls; it is published to n after every
	// batch, so that counting costs the load one plain increment.
	c opCounts
	n counters
}

// counters are the worker's totals, readable by any goroutine.
type counters struct {
	// Published by the worker after each batch.
	requests, schedules, cancels, missed, resets, reopened, errors atomic.Int64
	// Added to by tasks.
	fired atomic.Int64
	// The furthest the worker fell behind the offered load, in ns, since
	// the coordinator last swapped it to 0.
	backlog atomic.Int64
}

// publish makes the worker's counts c readable.
func (n *counters) publish(c opCounts) {
	n.requests.Store(c.Requests)
	n.schedules.Store(c.Schedules)
	n.cancels.Store(c.Cancels)
	n.missed.Store(c.Missed)
	n.resets.Store(c.Resets)
	n.reopened.Store(c.Reopened)
	n.errors.Store(c.Errors)
}

// read returns the counts as last published.
func (n *counters) read() opCounts {
	return opCounts{
		Requests:  n.requests.Load(),
		Schedules: n.schedules.Load(),
		Cancels:   n.cancels.Load(),
		Missed:    n.missed.Load(),
		Resets:    n.resets.Load(),
		Reopened:  n.reopened.Load(),
		Fired:     n.fired.Load(),
		Errors:    n.errors.Load(),
	}
}

// clock reads the monotonic clock as nanoseconds since the run began.
type clock struct{ base time.Time }

func (c clock) now() int64 { return int64(time.Since(c.base)) }

// newWorker returns worker id of a run against impl, with its share of
// the load. Its seeds derive from the load's seed and id alone, so that
// both implementations see the same sequences.
func newWorker[H any](impl timers[H], c clock, id int, share Load) *worker[H] {
	seed := share.Seed + uint64(id)<<32
	p := share.population()
	w := &worker[H]{
		impl:      impl,
		clock:     c,
		id:        uint64(id),
		share:     share,
		reqRng:    rand.New(rand.NewPCG(seed, 1)),
		renewRng:  rand.New(rand.NewPCG(seed, 2)),
		connRng:   rand.New(rand.NewPCG(seed, 3)),
		resp:      make([][]H, share.RespMax/time.Millisecond+2),
		conns:     make([]H, share.Conns),
		connTasks: make([]func(), share.Conns),
		connDue:   make([]atomic.Int64, share.Conns),
		late:      new(hist.Histogram),
	}
	// A quarter more than the steady state leaves room for fluctuation;
	// slots grows if it is not enough.
	n := (p.streaming + p.background) * 5 / 4
	w.slots = make([]H, 0, n)
	w.kinds = make([]uint8, 0, n)
	w.free = make([]int32, 0, n)
	for c := range w.connTasks {
		w.connTasks[c] = func() { w.connRan(c) }
	}
	return w
}

// key returns a distinct key for request id seq, or for connection c
// with conn set.
func (w *worker[H]) key(seq uint64, conn bool) uint64 {
	k := w.id<<48 | seq
	if conn {
		k |= 1 << 47
	}
	return k
}

// prefill schedules the steady-state population before the load starts:
// requests due to time out, with the remaining times they would have in
// a long-running stream, and the connections' idle timers.
func (w *worker[H]) prefill(ctx context.Context) {
	p := w.share.population()
	rng := rand.New(rand.NewPCG(w.share.Seed+w.id<<32, 4))
	for i := range p.streaming + p.background {
		if i%prefillChunk == 0 {
			w.n.publish(w.c) // the progress line counts the prefill as it goes
			if ctx.Err() != nil {
				return
			}
		}
		kind := kindStream
		if i >= p.streaming {
			kind = kindBackground
		}
		w.timeout(w.clock.now(), residual(rng, w.share.DelayMin, w.share.DelayMax), kind)
	}
	for c := range w.conns {
		now := w.clock.now()
		h, err := w.impl.Schedule(w.key(uint64(c), true), w.share.Idle, w.connTasks[c])
		w.count(err)
		w.conns[c] = h
		w.connDue[c].Store(now + int64(w.share.Idle))
	}
	w.n.publish(w.c)
}

// run issues the load every millisecond until stop is closed or ctx is
// done; start is the clock reading the load started at.
func (w *worker[H]) run(ctx context.Context, start int64, stop <-chan struct{}) {
	w.respDone = start / int64(time.Millisecond)
	for {
		now := w.clock.now()
		w.batch(now, now-start)
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		next := (now-start)/int64(time.Millisecond)*int64(time.Millisecond) + int64(time.Millisecond)
		time.Sleep(time.Duration(start + next - w.clock.now()))
	}
}

// batch does the work due at clock reading now, elapsed into the load.
func (w *worker[H]) batch(now, elapsed int64) {
	w.collect()
	w.respond(now / int64(time.Millisecond))
	due := int64(w.share.Rate * float64(elapsed) / 1e9)
	if lag := int64(float64(due-w.issued) / w.share.Rate * 1e9); lag > w.n.backlog.Load() {
		w.n.backlog.Store(lag)
	}
	limit := int64(w.share.Rate*maxBatch.Seconds()) + 1
	for ; w.issued < due && limit > 0; limit-- {
		w.request()
	}
	for ; w.owed > 0; w.owed-- {
		w.timeout(w.clock.now(), uniform(w.renewRng, w.share.DelayMin, w.share.DelayMax), kindBackground)
	}
	if len(w.conns) > 0 {
		due = int64(w.share.ResetRate * float64(elapsed) / 1e9)
		limit = int64(w.share.ResetRate*maxBatch.Seconds()) + 1
		for ; w.reads < due && limit > 0; limit-- {
			w.read()
		}
	}
	w.n.publish(w.c)
}

// collect frees the slots of the requests whose task ran and notes the
// background ones to re-issue.
func (w *worker[H]) collect() {
	w.mu.Lock()
	ran := w.ran
	w.ran = w.spare[:0]
	w.mu.Unlock()
	var zero H
	for _, s := range ran {
		if w.kinds[s] == kindBackground {
			w.owed++
		}
		w.slots[s] = zero // drop the handle, as a proxy would
		w.free = append(w.free, s)
	}
	w.spare = ran
}

// respond cancels the timeouts of the requests whose response is due by
// millisecond ms.
func (w *worker[H]) respond(ms int64) {
	for ; w.respDone < ms; w.respDone++ {
		b := &w.resp[(w.respDone+1)%int64(len(w.resp))]
		for _, h := range *b {
			w.c.Cancels++
			if !w.impl.Cancel(h) {
				w.c.Missed++ // it timed out first: the load fell far behind
			}
		}
		clear(*b)
		*b = (*b)[:0]
	}
}

// request issues one request: its timeout, and either its response or
// nothing (it will time out).
func (w *worker[H]) request() {
	w.issued++
	w.c.Requests++
	d := uniform(w.reqRng, w.share.DelayMin, w.share.DelayMax)
	if w.reqRng.Float64() >= w.share.Cancel {
		w.timeout(w.clock.now(), d, kindStream)
		return
	}
	r := uniform(w.reqRng, w.share.RespMin, w.share.RespMax)
	now := w.clock.now()
	h, err := w.schedule(now, d, -1)
	if err != nil {
		return
	}
	due := max((now+int64(r)+int64(time.Millisecond)-1)/int64(time.Millisecond), w.respDone+1)
	b := &w.resp[due%int64(len(w.resp))]
	*b = append(*b, h)
}

// timeout schedules a request that will time out and files its handle.
func (w *worker[H]) timeout(now int64, d time.Duration, kind uint8) {
	var s int32
	if n := len(w.free); n > 0 {
		s = w.free[n-1]
		w.free = w.free[:n-1]
	} else {
		var zero H
		s = int32(len(w.slots))
		w.slots = append(w.slots, zero)
		w.kinds = append(w.kinds, 0)
	}
	w.kinds[s] = kind
	h, err := w.schedule(now, d, s)
	if err != nil {
		w.free = append(w.free, s)
		return
	}
	w.slots[s] = h
}

// schedule starts a request timeout whose task reports to slot s (-1 for
// none). now is read just before the call so that the lateness the task
// measures is against the earliest deadline either implementation allows.
func (w *worker[H]) schedule(now int64, d time.Duration, s int32) (H, error) {
	w.seq++
	deadline := now + int64(d)
	h, err := w.impl.Schedule(w.key(w.seq, false), d, func() { w.timedOut(s, deadline) })
	w.count(err)
	return h, err
}

// count counts a Schedule call by its outcome.
func (w *worker[H]) count(err error) {
	if err != nil {
		w.c.Errors++
		return
	}
	w.c.Schedules++
}

// read is activity on a random connection: its idle timer restarts.
func (w *worker[H]) read() {
	w.reads++
	c := w.connRng.IntN(len(w.conns))
	now := w.clock.now()
	h, ok := w.impl.Reset(w.conns[c], w.key(uint64(c), true), w.share.Idle, w.connTasks[c])
	// Stored after Reset: the timer cannot reach the new deadline before
	// this store, and a task of the old deadline must not read it.
	w.connDue[c].Store(now + int64(w.share.Idle))
	w.conns[c] = h
	w.c.Resets++
	if !ok {
		w.c.Reopened++
	}
}

// timedOut is the task of a request timeout. Tasks run concurrently on
// the implementation's goroutines.
func (w *worker[H]) timedOut(s int32, deadline int64) {
	late := w.clock.now() - deadline
	w.mu.Lock()
	w.late.Record(late)
	if s >= 0 {
		w.ran = append(w.ran, s)
	}
	w.mu.Unlock()
	w.n.fired.Add(1)
}

// connRan is the task of connection c's idle timer.
func (w *worker[H]) connRan(c int) {
	late := w.clock.now() - w.connDue[c].Load()
	w.mu.Lock()
	w.late.Record(late)
	w.mu.Unlock()
	w.n.fired.Add(1)
}

// lateness returns the lateness recorded since the last call and starts
// a new recording.
func (w *worker[H]) lateness() hist.Snapshot {
	w.mu.Lock()
	h := w.late
	w.late = new(hist.Histogram)
	w.mu.Unlock()
	return h.Snapshot()
}

// peekLateness returns the lateness recorded since the last call to
// lateness, without restarting.
func (w *worker[H]) peekLateness() hist.Snapshot {
	w.mu.Lock()
	h := w.late
	w.mu.Unlock()
	return h.Snapshot()
}

// live yields every handle the worker holds.
func (w *worker[H]) live() iter.Seq[H] {
	return func(yield func(H) bool) {
		for _, b := range w.resp {
			for _, h := range b {
				if !yield(h) {
					return
				}
			}
		}
		for _, h := range w.slots {
			if !yield(h) {
				return
			}
		}
		for _, h := range w.conns {
			if !yield(h) {
				return
			}
		}
	}
}

// heldBytes is the memory the worker itself holds for its bookkeeping,
// which is not the timers' cost: handles, slot tables, buckets. The
// tasks' closures are not included: every timer needs one.
func (w *worker[H]) heldBytes() int64 {
	var h H
	hs := int64(unsafe.Sizeof(h))
	w.mu.Lock()
	ran := cap(w.ran)
	w.mu.Unlock()
	n := int64(cap(w.slots))*hs + int64(cap(w.kinds)) + int64(cap(w.free))*4 +
		int64(cap(w.conns))*hs + int64(cap(w.connTasks))*8 + int64(cap(w.connDue))*8 +
		int64(ran+cap(w.spare))*4 + int64(len(w.resp))*int64(unsafe.Sizeof(w.resp[0]))
	for _, b := range w.resp {
		n += int64(cap(b)) * hs
	}
	return n
}
