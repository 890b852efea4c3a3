package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/hist"
)

// The churn load's child: one run of one implementation in a process of
// its own (this command, re-executed with churnRunCmd), so that no run
// inherits another's heap, timers or runtime state. It prints one
// ChurnRun as JSON on stdout and exits.

// churnRunCmd is the hidden command that runs one churn measurement.
const churnRunCmd = "churn-run"

// The churn load's fixed shape (see ChurnConfig).
const (
	churnDelay      = 30 * time.Second // every churn timer's delay: none runs
	churnRing       = 1 << 16          // by default a goroutine cancels the timer it scheduled this many iterations earlier
	churnProbeEvery = 1 << 13          // iterations between two probes of one goroutine
	churnProbeDelay = 5 * time.Millisecond
	// Background timers are due churnBgMin plus a uniform share of
	// churnBgSpread after they are scheduled: none runs during a run.
	churnBgMin    = 30 * time.Second
	churnBgSpread = 30 * time.Second
	// churnPublish is how many iterations a goroutine makes between two
	// publications of its counts (and looks at the stop flag).
	churnPublish = 128
	// churnHeapEvery is the heap sampling period in the measured window.
	churnHeapEvery = 50 * time.Millisecond
	// churnProbeWait bounds how long a run waits, after its window, for
	// the probes due in the window to run.
	churnProbeWait = 2 * time.Second
	// churnMaxGoroutines bounds -goroutines: keys give a goroutine 7 bits.
	churnMaxGoroutines = 64
	// churnMaxRing bounds -cancel-after: iterations keep 55 bits of a
	// key, and a ring is one slice per goroutine.
	churnMaxRing = 1 << 24
)

// validRing reports whether n is a usable -cancel-after: a power of two,
// so that a ring slot is a mask away, in [1, churnMaxRing].
func validRing(n int) bool { return n >= 1 && n <= churnMaxRing && n&(n-1) == 0 }

// Implementations of the churn load, by the id the child is given.
const (
	churnStd   = "afterfunc" // time.AfterFunc + Timer.Stop
	churnWheel = "wheel"     // s.AfterFunc + Timer.Cancel
	churnKeyed = "keyed"     // s.AfterFunc(…, ByKey(key)) + Timer.Cancel
)

// churnImpls are the implementations in the order every round runs them;
// the first is the baseline the others are compared with.
var churnImpls = []string{churnStd, churnWheel, churnKeyed}

// churnCall is the call an implementation's rows use, as reports show it.
func churnCall(impl string) string {
	switch impl {
	case churnWheel:
		return "s.AfterFunc"
	case churnKeyed:
		return "s.AfterFunc(ByKey)"
	}
	return "time.AfterFunc"
}

// churnChild is what one child run is told.
type churnChild struct {
	impl       string
	goroutines int
	resident   int
	ring       int // cancel after this many iterations: a power of two
	warmup     time.Duration
	duration   time.Duration
	shards     int
	tick       time.Duration
	affinity   bool
	procs      int
}

// args returns the command line that gives a child c.
func (c churnChild) args() []string {
	return []string{churnRunCmd, "-impl", c.impl, "-goroutines", fmt.Sprint(c.goroutines),
		"-resident", fmt.Sprint(c.resident), "-cancel-after", fmt.Sprint(c.ring), "-warmup", c.warmup.String(), "-duration", c.duration.String(),
		"-shards", fmt.Sprint(c.shards), "-tick", c.tick.String(), fmt.Sprintf("-affinity=%v", c.affinity),
		"-gomaxprocs", fmt.Sprint(c.procs)}
}

// ChurnRun is what one run of one implementation measured, over its
// measured window. JSON durations are integer nanoseconds.
type ChurnRun struct {
	Impl       string `json:"impl"` // afterfunc, wheel or keyed
	Call       string `json:"call"`
	Goroutines int    `json:"goroutines"`
	Round      int    `json:"round"`
	// WaitedQuiet is how long the run waited for a quiet host first
	// (-wait-quiet).
	WaitedQuiet time.Duration `json:"waited_quiet_ns,omitempty"`
	GOMAXPROCS  int           `json:"gomaxprocs"`
	// Resident is the background timers scheduled before the load.
	Resident int `json:"resident"`
	// Prefill is how long scheduling them took.
	Prefill  time.Duration `json:"prefill_ns"`
	Measured time.Duration `json:"measured_ns"`

	// Pairs counts the cancels of the window: each ends a pair with the
	// Schedule 65,536 iterations before it. Schedules counts the window's
	// Schedule calls (probes apart): equal to Pairs once the rings are
	// full, as they are after a warm-up of a few tens of milliseconds.
	Pairs       int64   `json:"pairs"`
	Schedules   int64   `json:"schedules"`
	PairsPerSec float64 `json:"pairs_per_sec"`
	// CancelMissed counts cancels that returned false over the whole run:
	// a 30s timer cancelled 20-60ms after its Schedule must be pending,
	// so anything but 0 is a bug.
	CancelMissed int64 `json:"cancels_missed"`
	// CPU is the process's user+system time over the window (getrusage),
	// everything included: the load's loop, the implementation, the GC.
	CPU        time.Duration `json:"cpu_ns"`
	CPUPerPair float64       `json:"cpu_per_pair_ns"`
	// AllocsPerPair is heap allocations per pair, the task closure
	// included (one per Schedule, the same for every implementation).
	AllocsPerPair float64 `json:"allocs_per_pair"`
	GC            gcCost  `json:"gc"`
	// HeapObjects is /memory/classes/heap/objects:bytes (live objects and
	// dead ones not yet swept), sampled every 50ms in the window: the mean
	// and the largest sample, of HeapSamples.
	HeapObjects     int64 `json:"heap_objects_mean_bytes"`
	HeapObjectsPeak int64 `json:"heap_objects_peak_bytes"`
	HeapSamples     int   `json:"heap_samples"`
	// HeapLive is /gc/heap/live:bytes after a collection forced right
	// after the window, with the load still running.
	HeapLive int64 `json:"heap_live_bytes"`

	// Probes is the lateness of the probe timers due in the window: the
	// time the task started minus (the clock read just before the
	// Schedule call + 5ms). Exact, not binned. ProbesEarly counts probes
	// that ran before that deadline (must be 0); ProbesLost those due in
	// the window that had not run 2s after it.
	Probes      hist.Percentiles `json:"probes"`
	ProbesEarly int              `json:"probes_early"`
	ProbesLost  int              `json:"probes_lost"`
	// probes is every counted probe's lateness, sorted, for the parent to
	// pool over a summary's runs (see churnReport).
	probes []time.Duration

	// OtherCPU is the CPU time the rest of the host used over the window
	// (Linux only; 0 elsewhere).
	OtherCPU time.Duration `json:"other_cpu_ns"`
	// Shards and Tick are shardwheel's configuration (0 for AfterFunc).
	Shards int           `json:"shards,omitempty"`
	Tick   time.Duration `json:"tick_ns,omitempty"`
}

// runChurnChild is the child: it parses its command line, runs the load
// once and prints the ChurnRun. It returns an exit code; an interrupted
// run prints nothing and returns exitInterrupted.
func runChurnChild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c churnChild
	fs := flag.NewFlagSet(churnRunCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.impl, "impl", churnStd, "afterfunc, wheel or keyed")
	fs.IntVar(&c.goroutines, "goroutines", 2, "")
	fs.IntVar(&c.resident, "resident", 1_000_000, "")
	fs.IntVar(&c.ring, "cancel-after", churnRing, "")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "")
	fs.IntVar(&c.shards, "shards", runtime.GOMAXPROCS(0), "")
	fs.DurationVar(&c.tick, "tick", shardwheel.DefaultTick, "")
	fs.BoolVar(&c.affinity, "affinity", false, "")
	fs.IntVar(&c.procs, "gomaxprocs", 0, "")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if !slices.Contains(churnImpls, c.impl) || c.goroutines < 1 || c.goroutines > churnMaxGoroutines || !validRing(c.ring) {
		fmt.Fprintf(stderr, "bench %s: bad -impl %q, -goroutines %d or -cancel-after %d\n", churnRunCmd, c.impl, c.goroutines, c.ring)
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
		fmt.Fprintf(stderr, "bench %s: %v\n", churnRunCmd, err)
		return exitError
	}
	if err := json.NewEncoder(stdout).Encode(churnReport{Run: r, Probes: r.probes}); err != nil {
		fmt.Fprintf(stderr, "bench %s: %v\n", churnRunCmd, err)
		return exitError
	}
	return exitOK
}

// churnReport is what a child prints: its run, and its probes' lateness,
// which the parent pools and leaves out of its own JSON.
type churnReport struct {
	Run    ChurnRun        `json:"run"`
	Probes []time.Duration `json:"probe_lateness_ns"`
}

// churnLoad is the state of one run, shared by its goroutines.
type churnLoad struct {
	c     churnChild
	s     *shardwheel.Scheduler // nil for time.AfterFunc
	clock clock
	stop  atomic.Bool
	// fired counts churn and background tasks that ran: none should.
	fired atomic.Int64
	sink  atomic.Uint64

	// Probe lateness: every probe that ran, by its deadline.
	mu     sync.Mutex
	probes []churnProbe

	workers []*churnWorker
}

type churnProbe struct{ due, late int64 }

// churnWorker is one goroutine's loop state; its counters are published
// every churnPublish iterations for the coordinator to read.
type churnWorker struct {
	id        int
	keyBase   uint64
	schedules atomic.Int64
	cancels   atomic.Int64
	missed    atomic.Int64
	dues      []int64 // probe deadlines scheduled, the goroutine's own
	err       error
	_         [64]byte // the counters of two goroutines on separate lines
}

// run prefills the background timers, runs the load through warm-up and
// the window, and measures.
func (c churnChild) run(ctx context.Context) (ChurnRun, error) {
	r := ChurnRun{Impl: c.impl, Call: churnCall(c.impl), Goroutines: c.goroutines, GOMAXPROCS: runtime.GOMAXPROCS(0), Resident: c.resident}
	l := &churnLoad{c: c, clock: clock{base: time.Now()}}
	if c.impl != churnStd {
		s, err := shardwheel.New(wheelOptions(c.shards, c.tick, c.affinity)...)
		if err != nil {
			return r, err
		}
		// The process exits after the run: Stop only ends the shard
		// goroutines so that nothing runs while the result is printed.
		defer s.Stop()
		l.s = s
		r.Shards, r.Tick = c.shards, c.tick
	}
	t0 := time.Now()
	if err := l.prefill(ctx); err != nil {
		return r, err
	}
	r.Prefill = time.Since(t0)
	runtime.GC() // every implementation starts the load from a collected heap

	var wg sync.WaitGroup
	for i := range c.goroutines {
		w := &churnWorker{id: i, keyBase: uint64(i+1) << 56}
		l.workers = append(l.workers, w)
		wg.Go(func() { l.work(w) })
	}
	defer func() {
		l.stop.Store(true)
		wg.Wait()
	}()
	if sleepCtx(ctx, c.warmup) != nil {
		return r, ctx.Err()
	}

	a, schedA, pairsA := sampleProc(), l.count(func(w *churnWorker) int64 { return w.schedules.Load() }), l.count(func(w *churnWorker) int64 { return w.cancels.Load() })
	w0 := l.clock.now()
	heap := startHeapSampler()
	err := sleepCtx(ctx, c.duration)
	b, schedB, pairsB := sampleProc(), l.count(func(w *churnWorker) int64 { return w.schedules.Load() }), l.count(func(w *churnWorker) int64 { return w.cancels.Load() })
	w1 := l.clock.now()
	r.HeapObjects, r.HeapObjectsPeak, r.HeapSamples = heap()
	if err != nil {
		return r, err
	}
	r.HeapLive = liveHeap() // the load still running, as floor measures it

	l.stop.Store(true)
	wg.Wait()
	for _, w := range l.workers {
		if w.err != nil {
			return r, w.err
		}
		r.CancelMissed += w.missed.Load()
	}
	r.Measured = time.Duration(w1 - w0)
	r.Pairs, r.Schedules = pairsB-pairsA, schedB-schedA
	if r.Pairs == 0 {
		return r, fmt.Errorf("no cancel in the window: %v of warm-up did not fill the cancel rings (%d iterations each); lengthen the warm-up", c.warmup, c.ring)
	}
	secs := r.Measured.Seconds()
	r.PairsPerSec = float64(r.Pairs) / secs
	r.CPU = b.cpu - a.cpu
	if r.Pairs > 0 {
		r.CPUPerPair = float64(r.CPU) / float64(r.Pairs)
		r.AllocsPerPair = float64(b.allocs-a.allocs) / float64(r.Pairs)
	}
	r.GC = gcBetween(a, b)
	r.OtherCPU = max(b.host-a.host-r.CPU, 0)
	r.probes, r.ProbesEarly, r.ProbesLost = l.probeLateness(ctx, w0, w1)
	r.Probes = exactPercentiles(r.probes)
	if n := l.fired.Load(); n != 0 {
		return r, fmt.Errorf("%d timers of 30s or more ran within seconds", n)
	}
	return r, ctx.Err()
}

// count sums f over the workers.
func (l *churnLoad) count(f func(w *churnWorker) int64) int64 {
	var n int64
	for _, w := range l.workers {
		n += f(w)
	}
	return n
}

// task returns a churn or background timer's task: one captured value,
// the shape of a proxy's "fail this request" callback. It never runs.
func (l *churnLoad) task(key uint64) func() {
	return func() { l.fired.Add(1); l.sink.Store(key) }
}

// prefill schedules the background timers from this goroutine, before
// the load starts.
func (l *churnLoad) prefill(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range l.c.resident {
		if i%prefillChunk == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		d := churnBgMin + time.Duration(rng.Int64N(int64(churnBgSpread)))
		key := 1<<63 | uint64(i)
		var err error
		switch l.c.impl {
		case churnStd:
			time.AfterFunc(d, l.task(key))
		case churnWheel:
			_, err = l.s.AfterFunc(d, l.task(key))
		case churnKeyed:
			_, err = l.s.AfterFunc(d, l.task(key), shardwheel.ByKey(key))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// work is one goroutine of the load, in the implementation's own loop
// (not through an interface: the loop is what floor measures).
func (l *churnLoad) work(w *churnWorker) {
	switch l.c.impl {
	case churnStd:
		l.workStd(w)
	case churnWheel, churnKeyed:
		l.workWheel(w, l.c.impl == churnKeyed)
	}
}

// workStd is the loop on time.AfterFunc.
func (l *churnLoad) workStd(w *churnWorker) {
	ring := make([]*time.Timer, l.c.ring)
	mask := uint64(l.c.ring - 1)
	var cancels, missed int64
	for n := uint64(0); ; {
		key := w.keyBase | n
		t := time.AfterFunc(churnDelay, l.task(key))
		slot := n & mask
		if old := ring[slot]; old != nil {
			cancels++
			if !old.Stop() {
				missed++
			}
		}
		ring[slot] = t
		n++
		if n%churnPublish == 0 && l.publish(w, n, cancels, missed) {
			break
		}
	}
	for _, t := range ring {
		if t != nil {
			t.Stop()
		}
	}
}

// workWheel is the loop on shardwheel: s.AfterFunc, or with ByKey and a
// distinct key per timer when keyed.
func (l *churnLoad) workWheel(w *churnWorker, keyed bool) {
	ring := make([]shardwheel.Timer, l.c.ring)
	mask := uint64(l.c.ring - 1)
	var cancels, missed int64
	for n := uint64(0); ; {
		key := w.keyBase | n
		var t shardwheel.Timer
		var err error
		if keyed {
			t, err = l.s.AfterFunc(churnDelay, l.task(key), shardwheel.ByKey(key))
		} else {
			t, err = l.s.AfterFunc(churnDelay, l.task(key))
		}
		if err != nil {
			w.err = err
			return
		}
		slot := n & mask
		if n > mask {
			cancels++
			if !ring[slot].Cancel() {
				missed++
			}
		}
		ring[slot] = t
		n++
		if n%churnPublish == 0 && l.publish(w, n, cancels, missed) {
			break
		}
	}
}

// publish is a loop's every churnPublish-th iteration n: it schedules a
// probe every churnProbeEvery iterations, publishes the goroutine's counts
// and reports whether the load should stop.
func (l *churnLoad) publish(w *churnWorker, n uint64, cancels, missed int64) (stop bool) {
	if n%churnProbeEvery == 0 {
		l.probe(w, n)
	}
	w.schedules.Store(int64(n))
	w.cancels.Store(cancels)
	w.missed.Store(missed)
	return l.stop.Load()
}

// probe schedules one probe timer with the implementation's own call: it
// is never cancelled, and its task records how late it ran.
func (l *churnLoad) probe(w *churnWorker, n uint64) {
	now := l.clock.now()
	due := now + int64(churnProbeDelay)
	task := func() {
		late := l.clock.now() - due
		l.mu.Lock()
		l.probes = append(l.probes, churnProbe{due: due, late: late})
		l.mu.Unlock()
	}
	var err error
	switch l.c.impl {
	case churnStd:
		time.AfterFunc(churnProbeDelay, task)
	case churnWheel:
		_, err = l.s.AfterFunc(churnProbeDelay, task)
	case churnKeyed:
		_, err = l.s.AfterFunc(churnProbeDelay, task, shardwheel.ByKey(w.keyBase|1<<55|n))
	}
	if err == nil {
		w.dues = append(w.dues, due)
	}
}

// probeLateness waits until every probe due in [w0, w1) has run, or
// churnProbeWait has passed, and returns their lateness, how many ran
// early and how many had not run. The workers must have stopped.
func (l *churnLoad) probeLateness(ctx context.Context, w0, w1 int64) (late []time.Duration, early, lost int) {
	in := func(due int64) bool { return due >= w0 && due < w1 }
	want := 0
	for _, w := range l.workers {
		for _, d := range w.dues {
			if in(d) {
				want++
			}
		}
	}
	deadline := time.Now().Add(churnProbeWait)
	for {
		late = late[:0]
		l.mu.Lock()
		for _, pr := range l.probes {
			if in(pr.due) {
				late = append(late, time.Duration(pr.late))
			}
		}
		l.mu.Unlock()
		if len(late) >= want || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, d := range late {
		if d < 0 {
			early++
		}
	}
	slices.Sort(late)
	return late, early, max(want-len(late), 0)
}

// startHeapSampler samples the heap's object bytes every churnHeapEvery
// until the returned function is called, which returns their mean, the
// largest sample and the number of samples.
func startHeapSampler() func() (mean, peak int64, n int) {
	quit, exited := make(chan struct{}), make(chan struct{})
	var sum, top int64
	var count int
	go func() {
		defer close(exited)
		s := []metrics.Sample{{Name: mHeapObjects}}
		t := time.NewTicker(churnHeapEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			metrics.Read(s)
			v := int64(s[0].Value.Uint64())
			sum += v
			top = max(top, v)
			count++
		}
	}()
	return func() (int64, int64, int) {
		close(quit)
		<-exited
		if count == 0 {
			return 0, 0, 0
		}
		return sum / int64(count), top, count
	}
}
