package main

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/hist"
	"github.com/shardwheel/shardwheel/stats"
)

// runSpec is one run: the load against one implementation.
type runSpec struct {
	load     Load
	shards   int
	tick     time.Duration
	affinity bool
	keyed    bool // by key: keyedWheel and stdlibKeyed
	progress *progress
	// window, if set, is called for the measured window instead of just
	// waiting it out (lag captures a profile there). shardwheel only.
	window func(ctx context.Context, s *shardwheel.Scheduler, d time.Duration) error
}

// window is the measured part of a run: it returns after d, or early when
// ctx is done.
type window func(ctx context.Context, d time.Duration) error

// sleepCtx waits for d, or until ctx is done (returning its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runWheel runs spec against a new shardwheel.Scheduler.
func runWheel(ctx context.Context, spec runSpec) (Result, error) {
	base := liveHeap()
	s, err := shardwheel.New(wheelOptions(spec.shards, spec.tick, spec.affinity)...)
	if err != nil {
		return Result{}, err
	}
	win := window(sleepCtx)
	if spec.window != nil {
		win = func(ctx context.Context, d time.Duration) error { return spec.window(ctx, s, d) }
	}
	r := Result{Impl: nameWheel, Call: callWheel, Shards: spec.shards, Tick: spec.tick, Affinity: spec.affinity, Keyed: spec.keyed}
	if spec.keyed {
		r.Call = callWheelKeyed
		err = drive(ctx, spec, &r, base, keyedWheel{s, shardwheel.NewIndex[uint64](s)}, win, s.Stats)
	} else {
		err = drive(ctx, spec, &r, base, wheel{s}, win, s.Stats)
	}
	return r, err
}

// runStdlib runs spec against time.AfterFunc.
func runStdlib(ctx context.Context, spec runSpec) (Result, error) {
	base := liveHeap()
	r := Result{Impl: nameStdlib, Call: callStdlib, Keyed: spec.keyed}
	var err error
	if spec.keyed {
		r.Call = callStdlibKeyed
		err = drive(ctx, spec, &r, base, stdlibKeyed{new(sync.Map)}, sleepCtx, nil)
	} else {
		err = drive(ctx, spec, &r, base, stdlib{}, sleepCtx, nil)
	}
	return r, err
}

// runNull runs spec's load against null: the load alone, with no timer
// work. keyed changes nothing but the result's flag, as null's handle is
// the key either way.
func runNull(ctx context.Context, spec runSpec) (Result, error) {
	base := liveHeap()
	r := Result{Impl: nameNull, Call: callNull, Keyed: spec.keyed}
	err := drive(ctx, spec, &r, base, null{}, sleepCtx, nil)
	return r, err
}

// keptUp is the share of the offered rate a run must issue to count as
// keeping up: 2% of a 10s window is 200ms behind, more than a hiccup of
// the host, while a load that cannot keep up falls further behind every
// second.
const keptUp = 0.98

// mark is the state of a run at one end of its measured window.
type mark struct {
	at    int64
	proc  procSample
	ops   opCounts
	late  hist.Snapshot
	stats stats.Stats
	// backlog is the furthest a worker fell behind since the last mark.
	backlog time.Duration
}

// drive runs spec's load against impl and fills r: prefill, warm-up, the
// measured window, then the heap with the timers still resident, then
// teardown. heapBase is the live heap before impl existed; stats, if not
// nil, reads the implementation's own statistics. If ctx is done early,
// r holds what was measured so far and has Partial set.
func drive[H any](ctx context.Context, spec runSpec, r *Result, heapBase int64, impl timers[H], win window, stats func() stats.Stats) error {
	c := clock{base: time.Now()}
	ws := make([]*worker[H], spec.load.Workers)
	for i, share := range spec.load.split(len(ws)) {
		ws[i] = newWorker(impl, c, i, share)
	}
	st := newStatus(r.Impl, spec.load.Rate, ws)
	kick, stop := spec.progress.start(st.line)
	defer stop()
	// Show each phase as it starts, so that logs say where a run is.
	phase := func(name string, span time.Duration) {
		st.enter(name, span)
		kick()
	}

	phase("prefill", 0)
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { w.prefill(ctx) })
	}
	wg.Wait()
	runtime.GC() // both start the load from a collected heap

	var err error
	halt := make(chan struct{})
	start := c.now()
	for _, w := range ws {
		wg.Go(func() { w.run(ctx, start, halt) })
	}
	phase("warm-up", spec.load.Warmup)
	if sleepCtx(ctx, spec.load.Warmup) == nil {
		a := takeMark(c, ws, stats)
		phase("measure", spec.load.Duration)
		if werr := win(ctx, spec.load.Duration); werr != nil && ctx.Err() == nil {
			err = werr
		}
		fill(r, spec.load, a, takeMark(c, ws, stats))
	}
	close(halt)
	wg.Wait()

	st.enter("heap", 0)
	// Timers keep running during the collection: count them on both
	// sides of it, to match the heap as marked in between.
	before := pending(ws)
	heap := liveHeap()
	r.Resident = int(before+pending(ws)) / 2
	for _, w := range ws {
		heap -= w.heldBytes()
	}
	r.TimerHeap = heap - heapBase
	if r.Resident > 0 {
		r.BytesPerTimer = float64(r.TimerHeap) / float64(r.Resident)
	}
	st.enter("stop", 0)
	impl.Close(func(yield func(H) bool) {
		for _, w := range ws {
			for h := range w.live() {
				if !yield(h) {
					return
				}
			}
		}
	})
	r.Partial = ctx.Err() != nil
	st.finish(r)
	return err
}

// pending is the number of timers the workers' counts leave pending.
func pending[H any](ws []*worker[H]) int64 {
	var ops opCounts
	for _, w := range ws {
		ops = ops.add(w.n.read())
	}
	return ops.pending()
}

// takeMark reads the run's state; the workers' lateness recording
// restarts, so that the next mark holds the window's lateness alone.
func takeMark[H any](c clock, ws []*worker[H], stats func() stats.Stats) mark {
	m := mark{at: c.now(), proc: sampleProc()}
	for _, w := range ws {
		m.ops = m.ops.add(w.n.read())
		m.late.Merge(w.lateness())
		m.backlog = max(m.backlog, time.Duration(w.n.backlog.Swap(0)))
	}
	if stats != nil {
		m.stats = stats()
	}
	return m
}

// fill computes r's window figures from the marks at its ends.
func fill(r *Result, l Load, a, b mark) {
	secs := float64(b.at-a.at) / 1e9
	r.Measured = time.Duration(b.at - a.at)
	r.Ops = b.ops.sub(a.ops)
	r.TargetRate = l.Rate
	r.AchievedRate = float64(r.Ops.Requests) / secs
	r.KeptUp = r.AchievedRate >= keptUp*l.Rate
	r.MaxBacklog = b.backlog
	r.OpsPerSec = float64(r.Ops.calls()) / secs
	r.FiredPerSec = float64(r.Ops.Fired) / secs
	r.CPU = b.proc.cpu - a.proc.cpu
	if n := r.Ops.calls(); n > 0 {
		r.CPUPerOp = float64(r.CPU) / float64(n)
	}
	r.GC = gcBetween(a.proc, b.proc)
	r.Lateness = b.late.Percentiles()
	if b.stats.Shards != nil {
		lag := percentiles(b.stats.Total.TickLag.Sub(a.stats.Total.TickLag))
		late := percentiles(b.stats.Total.Lateness.Sub(a.stats.Total.Lateness))
		r.TickLag, r.WheelLateness = &lag, &late
		at, bt := a.stats.Total, b.stats.Total
		r.Wheel = &wheelCounts{
			Pending:    b.stats.Pending,
			QueuedPeak: bt.QueuedPeak,
			CapHits:    bt.CapHits - at.CapHits,
			Refiled:    bt.Refiled - at.Refiled,
			Ticks:      bt.Ticks - at.Ticks,
		}
	}
	r.OtherCPU = max(b.proc.host-a.proc.host-r.CPU, 0)
}
