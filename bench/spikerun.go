package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shardwheel/shardwheel"
)

// The spike command's child: one run of one implementation at one spike
// size in a process of its own (this command, re-executed with
// spikeRunCmd), so that no run inherits another's heap, and above all not
// the runtime's timer heaps, which never shrink. It prints one SpikeRun as
// JSON on stdout and exits.

// spikeRunCmd is the hidden command that runs one spike measurement.
const spikeRunCmd = "spike-run"

// Implementations of the spike, by the id the child is given.
const (
	spikeClosure = "closure"   // s.AfterFunc(d, func)
	spikeHandler = "handler"   // h.AfterFunc(key, d)
	spikeStd     = "afterfunc" // time.AfterFunc(d, func)
)

// spikeImpls are the implementations in the order every round runs them;
// the last is the baseline.
var spikeImpls = []string{spikeClosure, spikeHandler, spikeStd}

// spikeCall is the call an implementation's column uses, as reports
// show it.
func spikeCall(impl string) string {
	switch impl {
	case spikeClosure:
		return "s.AfterFunc"
	case spikeHandler:
		return "h.AfterFunc"
	}
	return "time.AfterFunc"
}

// The spike's fixed shape.
const (
	// spikeDelay is every spike timer's delay: long enough that none
	// fires before it is cancelled, as every one is.
	spikeDelay = time.Hour
	// spikeGCs is how many forced collections a measurement times: the
	// figure is their median, so that one preempted collection on a
	// shared host does not make it.
	spikeGCs = 3
	// spikeBaseGCs is how many the pre-spike measurement times: every
	// later one is judged against it.
	spikeBaseGCs = 5
	// spikeEvery is the period of the samples after the spike.
	spikeEvery = time.Second
	// spikeChurnStep is the churn's pacing: each goroutine issues what is
	// due every millisecond.
	spikeChurnStep = time.Millisecond
)

// spikeChild is what one child run is told.
type spikeChild struct {
	impl      string
	timers    int
	producers int
	churn     bool
	rate      float64 // churn timers a second, all goroutines
	churnG    int
	ring      int // a churn timer is cancelled this many iterations later
	warmup    time.Duration
	wait      time.Duration
	// statsEvery is how far apart shardwheel's Stats are read during
	// the samples after the spike; 0: not at all.
	statsEvery time.Duration
	shards     int
	tick       time.Duration
	affinity   bool
	procs      int
}

// args returns the command line that gives a child c.
func (c spikeChild) args() []string {
	return []string{spikeRunCmd, "-impl", c.impl, "-timers", fmt.Sprint(c.timers), "-producers", fmt.Sprint(c.producers),
		fmt.Sprintf("-churn=%v", c.churn), "-churn-rate", fmt.Sprint(c.rate), "-churn-goroutines", fmt.Sprint(c.churnG),
		"-cancel-after", fmt.Sprint(c.ring), "-warmup", c.warmup.String(), "-wait", c.wait.String(), "-stats-every", c.statsEvery.String(),
		"-shards", fmt.Sprint(c.shards), "-tick", c.tick.String(), fmt.Sprintf("-affinity=%v", c.affinity),
		"-gomaxprocs", fmt.Sprint(c.procs)}
}

// spikeSample is the process's heap and a forced collection's time at
// one moment of a run.
type spikeSample struct {
	// At is the time since the spike's last Cancel returned (samples
	// after the spike only).
	At time.Duration `json:"at_ns"`
	// Heap is the bytes of heap objects after forced collections
	// (MemStats.HeapAlloc), less, at the peaks, the run's own slice of
	// the spike's handles; HeapInuse is the heap's spans in use.
	Heap      int64 `json:"heap_bytes"`
	HeapInuse int64 `json:"heap_inuse_bytes"`
	// GC is the wall time of a forced collection (runtime.GC, which
	// returns once the heap is marked and swept): the median of the
	// collections the measurement forced.
	GC time.Duration `json:"gc_ns"`
	// Nodes is what shardwheel's Stats said right after (nil for
	// time.AfterFunc, and for the samples between Stats reads: see
	// -stats-every).
	Nodes *spikeNodes `json:"nodes,omitempty"`
}

// spikeNodes is shardwheel's account of its storage (Stats().Total).
type spikeNodes struct {
	Allocated      uint64 `json:"allocated"`
	Released       uint64 `json:"released"`
	BlocksReleased uint64 `json:"blocks_released"`
	BlocksRemade   uint64 `json:"blocks_remade"`
	Resident       int    `json:"resident"`
	HeldCancelled  int    `json:"held_cancelled"`
}

// SpikeRun is what one run of one implementation measured. JSON
// durations are integer nanoseconds.
type SpikeRun struct {
	Impl   string `json:"impl"` // closure, handler or afterfunc
	Call   string `json:"call"`
	Timers int    `json:"timers"`
	Round  int    `json:"round"`
	Churn  bool   `json:"churn"`
	// Before is measured after the churn's warm-up (or at once without
	// churn); Peak with the spike's timers all pending; Samples every
	// second once the last Cancel returned, until the run came back or
	// the wait was over; After is the last of them, its Nodes read once
	// the sampling was over.
	Before  spikeSample   `json:"before"`
	Peak    spikeSample   `json:"peak"`
	Samples []spikeSample `json:"samples"`
	After   spikeSample   `json:"after"`
	// CameBack reports whether a sample met the come-back criterion
	// (cameBack), and ComeBack is that sample's At.
	CameBack bool          `json:"came_back"`
	ComeBack time.Duration `json:"come_back_ns"`
	// Second is the peak of a second spike of the same size, scheduled
	// once the first came back (or the wait was over).
	Second spikeSample `json:"second_peak"`
	// Handles is the bytes of the run's slice of spike handles, left out
	// of the peaks' Heap (the collections they time do scan it).
	Handles int64 `json:"handles_bytes"`
	// Schedule and Cancel are how long scheduling and cancelling the
	// first spike took; Filed how long shardwheel's shards then took to
	// have it in their wheels (settleSpike), before the peak was
	// measured.
	Schedule time.Duration `json:"schedule_ns"`
	Filed    time.Duration `json:"filed_ns,omitempty"`
	Cancel   time.Duration `json:"cancel_ns"`
	// ChurnRate is the churn's achieved rate over the run (0 without
	// churn); ChurnMissed counts its cancels that returned false (must
	// be 0: a churn timer is cancelled long before it is due).
	ChurnRate   float64 `json:"churn_rate,omitempty"`
	ChurnMissed int64   `json:"churn_cancels_missed,omitempty"`
	// Wall is the run from its pre-spike measurement to the second
	// spike's cancels; OtherCPU the CPU time the rest of the host used
	// meanwhile (Linux only; 0 elsewhere).
	Wall     time.Duration `json:"wall_ns"`
	OtherCPU time.Duration `json:"other_cpu_ns"`
	Shards   int           `json:"shards,omitempty"`
	Tick     time.Duration `json:"tick_ns,omitempty"`
}

// spikeTargets is the come-back criterion: the heap back within HeapShare
// of the spike's growth above the pre-spike figure, and a forced
// collection no slower than GCFactor times its pre-spike time plus
// GCSlack. Within is the most time it may take to come back.
type spikeTargets struct {
	HeapShare float64       `json:"heap_share"`
	GCFactor  float64       `json:"gc_factor"`
	GCSlack   time.Duration `json:"gc_slack_ns"`
	Within    time.Duration `json:"within_ns"`
}

// defaultSpikeTargets are the targets bench/README.md and BENCHMARKS.md
// state: the heap within 10% of the spike's growth, a forced collection
// within twice its time before plus 2ms, within 20 s.
var defaultSpikeTargets = spikeTargets{HeapShare: 0.10, GCFactor: 2, GCSlack: 2 * time.Millisecond, Within: 20 * time.Second}

// heapBack reports whether s's heap is back within the share of the
// spike's growth (peak over before); a spike that grew nothing is back.
func (t spikeTargets) heapBack(before, peak, s spikeSample) bool {
	growth := max(peak.Heap-before.Heap, 0)
	return float64(s.Heap-before.Heap) <= t.HeapShare*float64(growth)
}

// gcBack reports whether s's forced collection is back within the
// factor (plus the slack) of before's.
func (t spikeTargets) gcBack(before, s spikeSample) bool {
	return float64(s.GC) <= t.GCFactor*float64(before.GC)+float64(t.GCSlack)
}

// cameBack is the come-back criterion: heap and collection both back.
func (t spikeTargets) cameBack(before, peak, s spikeSample) bool {
	return t.heapBack(before, peak, s) && t.gcBack(before, s)
}

// kept is the share of the spike's heap growth s still holds: (s -
// before) / (peak - before); 0 for a spike that grew nothing.
func kept(before, peak, s spikeSample) float64 {
	growth := peak.Heap - before.Heap
	if growth <= 0 {
		return 0
	}
	return float64(s.Heap-before.Heap) / float64(growth)
}

// runSpikeChild is the child: it parses its command line, runs the spike
// once and prints the SpikeRun. It returns an exit code; an interrupted
// run prints nothing and returns exitInterrupted.
func runSpikeChild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	d := defaultSpikeConfig()
	c := spikeChild{producers: d.Producers, rate: d.ChurnRate, churnG: d.ChurnGoroutines, ring: d.Ring, warmup: d.Warmup, wait: d.Wait}
	fs := flag.NewFlagSet(spikeRunCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.impl, "impl", spikeClosure, "closure, handler or afterfunc")
	fs.IntVar(&c.timers, "timers", 1_000_000, "")
	fs.IntVar(&c.producers, "producers", c.producers, "")
	fs.BoolVar(&c.churn, "churn", true, "")
	fs.Float64Var(&c.rate, "churn-rate", c.rate, "")
	fs.IntVar(&c.churnG, "churn-goroutines", c.churnG, "")
	fs.IntVar(&c.ring, "cancel-after", c.ring, "")
	fs.DurationVar(&c.warmup, "warmup", c.warmup, "")
	fs.DurationVar(&c.wait, "wait", c.wait, "")
	fs.DurationVar(&c.statsEvery, "stats-every", 0, "")
	fs.IntVar(&c.shards, "shards", runtime.GOMAXPROCS(0), "")
	fs.DurationVar(&c.tick, "tick", shardwheel.DefaultTick, "")
	fs.BoolVar(&c.affinity, "affinity", false, "")
	fs.IntVar(&c.procs, "gomaxprocs", 0, "")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if !slices.Contains(spikeImpls, c.impl) || c.timers < 1 || c.producers < 1 || c.churnG < 1 || !validRing(c.ring) {
		fmt.Fprintf(stderr, "bench %s: bad -impl %q, -timers %d, -producers %d, -churn-goroutines %d or -cancel-after %d\n",
			spikeRunCmd, c.impl, c.timers, c.producers, c.churnG, c.ring)
		return exitUsage
	}
	if c.procs > 0 {
		runtime.GOMAXPROCS(c.procs)
	}
	r, err := c.run(ctx)
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "bench %s: %v\n", spikeRunCmd, err)
		return exitError
	}
	if err := json.NewEncoder(stdout).Encode(r); err != nil {
		fmt.Fprintf(stderr, "bench %s: %v\n", spikeRunCmd, err)
		return exitError
	}
	return exitOK
}

// spikeOps are one implementation's calls: schedule a timer with its own
// task (a closure capturing key, or the handler called with key), and
// cancel it. Function values, not an interface, so that a handle is never
// boxed.
type spikeOps[H any] struct {
	schedule func(key uint64, d time.Duration) (H, error)
	cancel   func(h H) bool
}

// run makes c's implementation and runs the spike on it.
func (c spikeChild) run(ctx context.Context) (SpikeRun, error) {
	var fired atomic.Int64
	var sink atomic.Uint64
	task := func(key uint64) func() {
		// One captured value, the shape of a proxy's "fail this request".
		return func() { fired.Add(1); sink.Store(key) }
	}
	if c.impl == spikeStd {
		ops := spikeOps[*time.Timer]{
			schedule: func(key uint64, d time.Duration) (*time.Timer, error) { return time.AfterFunc(d, task(key)), nil },
			cancel:   (*time.Timer).Stop,
		}
		return runSpike(ctx, c, nil, ops, &fired)
	}
	s, err := shardwheel.New(wheelOptions(c.shards, c.tick, c.affinity)...)
	if err != nil {
		return SpikeRun{}, err
	}
	// The process exits after the run: Stop only ends the shard
	// goroutines so that nothing runs while the result is printed.
	defer s.Stop()
	ops := spikeOps[shardwheel.Timer]{
		schedule: func(key uint64, d time.Duration) (shardwheel.Timer, error) { return s.AfterFunc(d, task(key)) },
		cancel:   shardwheel.Timer.Cancel,
	}
	if c.impl == spikeHandler {
		h, err := s.NewHandler(func(uint64) { fired.Add(1) })
		if err != nil {
			return SpikeRun{}, err
		}
		ops.schedule = func(key uint64, d time.Duration) (shardwheel.Timer, error) { return h.AfterFunc(key, d) }
	}
	return runSpike(ctx, c, s, ops, &fired)
}

// runSpike is one run: the churn's warm-up (if on), the pre-spike
// measurement, the spike and its peak, its cancels, a sample every second
// until it came back or c.wait is over, and a second spike's peak.
// shardwheel's Stats are read before the spike, at the peaks, once the
// sampling is over, and during it only every c.statsEvery (never if 0):
// a read wakes an idle shard goroutine, which does work then.
func runSpike[H any](ctx context.Context, c spikeChild, s *shardwheel.Scheduler, ops spikeOps[H], fired *atomic.Int64) (SpikeRun, error) {
	r := SpikeRun{Impl: c.impl, Call: spikeCall(c.impl), Timers: c.timers, Churn: c.churn}
	if s != nil {
		r.Shards, r.Tick = c.shards, c.tick
	}
	t := defaultSpikeTargets
	var ch *spikeChurn[H]
	if c.churn {
		ch = startSpikeChurn(c, ops)
		defer ch.stop()
		if err := sleepCtx(ctx, c.warmup); err != nil {
			return r, err
		}
	}
	cpu0, host0, w0 := cpuTime(), hostCPUTime(), time.Now()
	r.Before = measureHeap(spikeBaseGCs, 0)
	r.Before.Nodes = readNodes(s)

	s0 := time.Now()
	handles, err := spikeSchedule(ctx, ops, c.timers, c.producers)
	if err != nil {
		return r, err
	}
	r.Schedule = time.Since(s0)
	for _, hs := range handles {
		r.Handles += int64(cap(hs)) * int64(unsafe.Sizeof(*new(H)))
	}
	if r.Filed, err = settleSpike(ctx, s, c.timers); err != nil {
		return r, err
	}
	r.Peak = measureHeap(spikeGCs, r.Handles)
	r.Peak.Nodes = readNodes(s)
	c0 := time.Now()
	spikeCancel(ops, handles)
	handles = nil
	done := time.Now()
	r.Cancel = done.Sub(c0)

	var nextRead time.Duration // the sample time of the next Stats read
	for k := 0; ; k++ {
		due := time.Duration(k) * spikeEvery
		if err := sleepCtx(ctx, time.Until(done.Add(due))); err != nil {
			return r, err
		}
		at := time.Since(done)
		smp := measureHeap(spikeGCs, 0)
		smp.At = at
		if c.statsEvery > 0 && due >= nextRead {
			smp.Nodes, nextRead = readNodes(s), due+c.statsEvery
		}
		r.Samples = append(r.Samples, smp)
		if t.cameBack(r.Before, r.Peak, smp) {
			r.CameBack, r.ComeBack = true, smp.At
			break
		}
		if smp.At >= c.wait {
			break
		}
	}
	last := &r.Samples[len(r.Samples)-1]
	if last.Nodes == nil {
		last.Nodes = readNodes(s)
	}
	r.After = *last

	handles, err = spikeSchedule(ctx, ops, c.timers, c.producers)
	if err != nil {
		return r, err
	}
	if _, err := settleSpike(ctx, s, c.timers); err != nil {
		return r, err
	}
	r.Second = measureHeap(spikeGCs, r.Handles)
	r.Second.Nodes = readNodes(s)
	spikeCancel(ops, handles)
	r.Wall = time.Since(w0)
	r.OtherCPU = max(hostCPUTime()-host0-(cpuTime()-cpu0), 0)
	if ch != nil {
		r.ChurnRate, r.ChurnMissed = ch.stop()
	}
	if n := fired.Load(); n != 0 {
		return r, fmt.Errorf("%d timers ran: churn timers are cancelled long before their 30s, spike timers are due in an hour", n)
	}
	return r, nil
}

// spikeSettle bounds settleSpike's wait.
const spikeSettle = 30 * time.Second

// settleSpike waits until s's shards have taken every new timer from
// their queues into their wheels and published it (Stats: nothing
// queued, at least n resident), so that the counts read at a peak are the
// whole spike's: a shard publishes its counts at the end of a pass. It
// returns how long it waited, at most spikeSettle; nothing for
// time.AfterFunc (s nil), whose timers need no filing.
func settleSpike(ctx context.Context, s *shardwheel.Scheduler, n int) (time.Duration, error) {
	if s == nil {
		return 0, nil
	}
	t0 := time.Now()
	for time.Since(t0) < spikeSettle {
		if st := s.Stats().Total; st.Queued == 0 && st.Resident >= n {
			break
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return time.Since(t0), err
		}
	}
	return time.Since(t0), nil
}

// measureHeap forces gcs collections and returns the heap after them,
// less handles bytes, and their median wall time.
func measureHeap(gcs int, handles int64) spikeSample {
	d := make([]float64, gcs)
	for i := range d {
		t0 := time.Now()
		runtime.GC()
		d[i] = float64(time.Since(t0))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	med, _, _ := medianRange(d)
	return spikeSample{Heap: int64(ms.HeapAlloc) - handles, HeapInuse: int64(ms.HeapInuse) - handles, GC: time.Duration(med)}
}

// readNodes returns shardwheel's account of its nodes, or nil for
// time.AfterFunc (s nil).
func readNodes(s *shardwheel.Scheduler) *spikeNodes {
	if s == nil {
		return nil
	}
	st := s.Stats().Total
	return &spikeNodes{Allocated: st.NodesAllocated, Released: st.NodesReleased, BlocksReleased: st.BlocksReleased,
		BlocksRemade: st.BlocksRemade, Resident: st.Resident, HeldCancelled: st.HeldCancelled}
}

// spikeSchedule schedules n timers of spikeDelay from producers
// goroutines at once and returns their handles, one slice per producer.
func spikeSchedule[H any](ctx context.Context, ops spikeOps[H], n, producers int) ([][]H, error) {
	handles := make([][]H, producers)
	errs := make([]error, producers)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			mine := make([]H, 0, n/producers+1)
			for j, i := 0, p; i < n; j, i = j+1, i+producers {
				if j%prefillChunk == 0 && ctx.Err() != nil {
					errs[p] = ctx.Err()
					return
				}
				h, err := ops.schedule(1<<63|uint64(i), spikeDelay)
				if err != nil {
					errs[p] = err
					return
				}
				mine = append(mine, h)
			}
			handles[p] = mine
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return handles, nil
}

// spikeCancel cancels every handle, each producer's from a goroutine of
// its own, in the order they were scheduled.
func spikeCancel[H any](ops spikeOps[H], handles [][]H) {
	var wg sync.WaitGroup
	for _, hs := range handles {
		wg.Go(func() {
			for _, h := range hs {
				ops.cancel(h)
			}
		})
	}
	wg.Wait()
}

// spikeChurn is a proxy's steady churn beside the spike: goroutines that
// each schedule a 30s timer and cancel the one they scheduled ring
// iterations earlier, paced to rate timers a second in all.
type spikeChurn[H any] struct {
	quit    atomic.Bool
	wg      sync.WaitGroup
	start   time.Time
	issued  atomic.Int64
	missed  atomic.Int64
	stopped sync.Once
}

// startSpikeChurn starts c's churn on ops.
func startSpikeChurn[H any](c spikeChild, ops spikeOps[H]) *spikeChurn[H] {
	ch := &spikeChurn[H]{start: time.Now()}
	per := c.rate / float64(c.churnG)
	for g := range c.churnG {
		ch.wg.Go(func() { ch.work(ops, uint64(g)<<56, per, c.ring) })
	}
	return ch
}

// work is one churn goroutine: every spikeChurnStep it issues the pairs
// due since it started, at per a second, catching up after a stall.
func (ch *spikeChurn[H]) work(ops spikeOps[H], keyBase uint64, per float64, ring int) {
	hs := make([]H, ring)
	mask := uint64(ring - 1)
	var n uint64
	for !ch.quit.Load() {
		due := uint64(time.Since(ch.start).Seconds() * per)
		for ; n < due; n++ {
			h, err := ops.schedule(keyBase|n, churnDelay)
			if err != nil {
				panic(err) // no limit is set, and the scheduler is stopped only after the churn
			}
			slot := n & mask
			if n > mask && !ops.cancel(hs[slot]) {
				ch.missed.Add(1)
			}
			hs[slot] = h
			ch.issued.Add(1)
		}
		time.Sleep(spikeChurnStep)
	}
	for i := range min(n, uint64(ring)) {
		ops.cancel(hs[(n-1-i)&mask])
	}
}

// stop stops the churn (once; later calls only report) and returns its
// achieved rate and its cancels that returned false.
func (ch *spikeChurn[H]) stop() (rate float64, missed int64) {
	ch.stopped.Do(func() {
		ch.quit.Store(true)
		ch.wg.Wait()
	})
	return float64(ch.issued.Load()) / time.Since(ch.start).Seconds(), ch.missed.Load()
}
