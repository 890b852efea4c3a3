// Command harness is the workload program of the A/B command, bench/ab.sh:
// the same source, built once against each of the two trees it compares,
// runs one workload per process and prints one JSON line of metrics.
//
// It lives in a directory whose name starts with an underscore, which the
// go command leaves out of package patterns (./..., ./bench/...): the main
// module's go build, go vet, go test and staticcheck never see it, so a
// change to the library's API cannot break the module's own build through
// it, and the harness is never compiled against the main module except by
// ab.sh and TestABHarness, which give it a go.mod of its own (module
// abharness, with a replace of the library by the tree under test). An
// underscore rather than testdata, because this is a program, not a test's
// input data.
//
// It uses only API that every revision since 9a175ea has (New, WithTick,
// AfterFunc, Timer.Cancel, WithTimeout, Stop), so that one source builds
// against both sides. Unix only: it reads the process's CPU time with
// getrusage.
//
//	harness wtcancel|churn|burst|rate [-quick] [-round N] [flags]
//
// The output is {"workload": ..., "round": ..., "config": {...},
// "metrics": {...}}, the metrics in the order a table should show them.
// -round rotates the order in which a process runs its implementations, so
// that neither always goes first (but for the burst: see burst); both sides
// of an A/B round get the same.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shardwheel/shardwheel"
)

const tick = time.Millisecond

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	run, ok := workloads[os.Args[1]]
	if !ok {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	out := &output{Workload: os.Args[1], Config: map[string]any{}}
	fs.IntVar(&out.Round, "round", 0, "round number: odd rounds run the implementations in the other order")
	quick := fs.Bool("quick", false, "short windows and small loads, for a smoke run")
	cfg := run(fs, quick)
	if err := fs.Parse(os.Args[2:]); err != nil {
		fail(err)
	}
	m, err := cfg(out)
	if err != nil {
		fail(err)
	}
	out.Metrics, out.CPU = m, cpuNow().Seconds()
	line, err := json.Marshal(out)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(line))
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: harness wtcancel|churn|burst|rate [-quick] [-round N] [flags]; harness <workload> -h for its flags")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "harness:", err)
	os.Exit(1)
}

// A workload declares its flags on fs and returns the function that runs
// it, once the flags are parsed (quick among them), recording its
// configuration in out.Config.
type workload func(fs *flag.FlagSet, quick *bool) func(out *output) (*metrics, error)

var workloads = map[string]workload{
	"wtcancel": wtcancel,
	"churn":    churn,
	"burst":    burst,
	"rate":     rate,
}

type output struct {
	Workload string         `json:"workload"`
	Round    int            `json:"round"`
	Config   map[string]any `json:"config"`
	Metrics  *metrics       `json:"metrics"`
	// CPU is the process's CPU time when it printed, in seconds: ab.sh
	// takes it from the host's busy time over the run to tell how busy
	// other processes kept the host.
	CPU float64 `json:"cpu_s"`
}

// metrics is an ordered set of named figures; it marshals as a JSON object
// in the order they were set, and leaves out figures that are not finite
// (a ratio over 0).
type metrics struct {
	keys []string
	vals map[string]float64
}

func newMetrics() *metrics { return &metrics{vals: map[string]float64{}} }

func (m *metrics) set(key string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if _, ok := m.vals[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.vals[key] = v
}

func (m *metrics) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.WriteString(strconv.FormatFloat(m.vals[k], 'g', 6, 64))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// cpuNow returns the CPU time the process has used, user plus system.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail(fmt.Errorf("getrusage: %w", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settle collects the garbage of what ran before, so that a phase does not
// pay for the previous one's.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

// pick returns the quick value under -quick, else the full one.
func pick[T any](quick bool, full, short T) T {
	if quick {
		return short
	}
	return full
}

// ordered returns the two in the round's order: as given in even rounds,
// swapped in odd ones.
func ordered[T any](round int, a, b T) []T {
	if round%2 == 1 {
		return []T{b, a}
	}
	return []T{a, b}
}

// handlesLike returns a maker of slices of the type of t, a handle that
// AfterFunc returned (and that it cancels). The handle's type is inferred,
// not named: both sides' trees build this source, and the type's name is
// not the same in every revision.
func handlesLike[T interface{ Cancel() bool }](t T, err error) func(n int) []T {
	if err == nil {
		t.Cancel()
	}
	return func(n int) []T { return make([]T, n) }
}

func newScheduler() (*shardwheel.Scheduler, error) {
	return shardwheel.New(shardwheel.WithTick(tick))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// posRatio is ratio for figures above a baseline: none unless both are
// above it (at a low rate the cost is within the baseline's noise).
func posRatio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return math.NaN()
	}
	return a / b
}

// padded is a counter on a cache line of its own.
type padded struct {
	atomic.Int64
	_ [56]byte
}

// ---------------------------------------------------------------------------
// wtcancel: WithTimeout + cancel pairs, nothing else pending.

func wtcancel(fs *flag.FlagSet, quick *bool) func(out *output) (*metrics, error) {
	warmup := fs.Duration("warmup", 0, "unmeasured time per implementation and parent before its window (default 300ms, 50ms with -quick)")
	window := fs.Duration("window", 0, "measured time per implementation and parent, in two halves (default 2s, 200ms with -quick)")
	gs := fs.Int("goroutines", 2, "goroutines making pairs")
	timeout := fs.Duration("timeout", 500*time.Millisecond, "each context's timeout")
	return func(out *output) (*metrics, error) {
		if *warmup == 0 {
			*warmup = pick(*quick, 300*time.Millisecond, 50*time.Millisecond)
		}
		if *window == 0 {
			*window = pick(*quick, 2*time.Second, 200*time.Millisecond)
		}
		out.Config["warmup"], out.Config["window"] = warmup.String(), window.String()
		out.Config["goroutines"], out.Config["timeout"] = *gs, timeout.String()
		s, err := newScheduler()
		if err != nil {
			return nil, err
		}
		defer s.Stop()
		type impl struct {
			name string
			with func(context.Context, time.Duration) (context.Context, context.CancelFunc)
		}
		sw := impl{"s.WithTimeout", s.WithTimeout}
		std := impl{"context.WithTimeout", context.WithTimeout}
		// Each goroutine has a parent of its own, as each request has: a
		// parent shared by both would measure its lock (package context
		// registers a child with a cancellable parent).
		type parent struct {
			name string
			make func() (context.Context, context.CancelFunc)
		}
		bg := parent{"Background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }}
		wc := parent{"WithCancel parent", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}}
		m := newMetrics()
		res := map[string]float64{}
		for _, p := range ordered(out.Round, bg, wc) {
			pairs := func(im impl, d time.Duration) (int64, time.Duration) {
				return spin(*gs, d, func() (func(), func()) {
					ctx, end := p.make()
					return func() {
						_, cancel := im.with(ctx, *timeout)
						cancel()
					}, end
				})
			}
			both := ordered(out.Round, sw, std)
			for _, im := range both {
				pairs(im, *warmup)
			}
			// A B B A, each half the window: a drift of the host over the
			// window falls on both alike.
			var n [2]int64
			var cpu [2]time.Duration
			for _, i := range []int{0, 1, 1, 0} {
				k, c := pairs(both[i], *window/2)
				n[i] += k
				cpu[i] += c
			}
			for i, im := range both {
				res[p.name+"/"+im.name] = float64(cpu[i]) / float64(n[i])
			}
		}
		for _, p := range []string{bg.name, wc.name} {
			a, b := res[p+"/"+sw.name], res[p+"/"+std.name]
			m.set(p+": s.WithTimeout+cancel ns/pair", a)
			m.set(p+": context.WithTimeout+cancel ns/pair", b)
			m.set(p+": s/context", ratio(a, b))
		}
		return m, nil
	}
}

// spin runs g goroutines for d, each calling in a loop the step that mk
// gives it (and end once it stops), and returns the steps taken and the
// process's CPU time over the run.
func spin(g int, d time.Duration, mk func() (step func(), end func())) (int64, time.Duration) {
	var stop atomic.Bool
	var total atomic.Int64
	var wg sync.WaitGroup
	cpu0 := cpuNow()
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			step, end := mk()
			var n int64
			for !stop.Load() {
				for range 64 {
					step()
				}
				n += 64
			}
			end()
			total.Add(n)
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return total.Load(), cpuNow() - cpu0
}

// ---------------------------------------------------------------------------
// churn: request-timeout churn over a million resident timers.

func churn(fs *flag.FlagSet, quick *bool) func(out *output) (*metrics, error) {
	warmup := fs.Duration("warmup", 0, "unmeasured churn before the window (default 1s, 200ms with -quick)")
	window := fs.Duration("window", 0, "measured churn (default 2s, 300ms with -quick)")
	resident := fs.Int("resident", 0, "background timers, due in 1h to 2h (default 1M, 100k with -quick)")
	ring := fs.Int("cancel-after", 1<<16, "a goroutine cancels the timer it scheduled this many iterations earlier")
	gs := fs.Int("goroutines", 2, "churning goroutines")
	return func(out *output) (*metrics, error) {
		if *warmup == 0 {
			*warmup = pick(*quick, time.Second, 200*time.Millisecond)
		}
		if *window == 0 {
			*window = pick(*quick, 2*time.Second, 300*time.Millisecond)
		}
		if *resident == 0 {
			*resident = pick(*quick, 1_000_000, 100_000)
		}
		if *ring < 1 {
			return nil, errors.New("-cancel-after must be at least 1")
		}
		out.Config["warmup"], out.Config["window"] = warmup.String(), window.String()
		out.Config["resident"], out.Config["cancel_after"], out.Config["goroutines"] = *resident, *ring, *gs
		res := map[string]float64{}
		for _, impl := range ordered(out.Round, "s.AfterFunc", "time.AfterFunc") {
			settle()
			ns, err := churnPhase(impl, *gs, *resident, *ring, *warmup, *window)
			if err != nil {
				return nil, err
			}
			res[impl] = ns
		}
		m := newMetrics()
		m.set("s.AfterFunc+Cancel ns/pair", res["s.AfterFunc"])
		m.set("time.AfterFunc+Stop ns/pair", res["time.AfterFunc"])
		m.set("s/time", ratio(res["s.AfterFunc"], res["time.AfterFunc"]))
		return m, nil
	}
}

// churnPhase files resident background timers on impl, then churns on it
// with gs goroutines, and returns the CPU per schedule+cancel pair over
// the window.
func churnPhase(impl string, gs, resident, ring int, warmup, window time.Duration) (float64, error) {
	const delay = 30 * time.Second
	noop := func() {}
	var s *shardwheel.Scheduler
	if impl == "s.AfterFunc" {
		var err error
		if s, err = newScheduler(); err != nil {
			return 0, err
		}
		defer s.Stop()
	}
	// The background, filed by every goroutine so that it spreads over
	// the Ps (s.AfterFunc files a timer in the wheel of the caller's P).
	var bgTimers [][]*time.Timer
	if s == nil {
		bgTimers = make([][]*time.Timer, gs)
	}
	var wg sync.WaitGroup
	errs := make([]error, gs)
	for g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			n := resident / gs
			if g < resident%gs {
				n++
			}
			for range n {
				d := time.Hour + time.Duration(r.Int64N(int64(time.Hour)))
				if s != nil {
					if _, err := s.AfterFunc(d, noop); err != nil {
						errs[g] = err
						return
					}
				} else {
					bgTimers[g] = append(bgTimers[g], time.AfterFunc(d, noop))
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	defer func() {
		for _, ts := range bgTimers {
			for _, t := range ts {
				t.Stop()
			}
		}
	}()
	settle()

	var stop atomic.Bool
	counts := make([]padded, gs)
	for g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			// A loop per implementation, alike but for the calls: the
			// measured pair pays no indirect call on either side.
			if s != nil {
				handles := handlesLike(s.AfterFunc(time.Hour, noop))(ring)
				for j := 0; ; j = (j + 1) % ring {
					t, err := s.AfterFunc(delay, noop)
					if err != nil {
						errs[g] = err
						return
					}
					handles[j].Cancel()
					handles[j] = t
					if n++; n%128 == 0 {
						counts[g].Store(n)
						if stop.Load() {
							break
						}
					}
				}
				for _, h := range handles {
					h.Cancel()
				}
				return
			}
			handles := make([]*time.Timer, ring)
			for j := 0; ; j = (j + 1) % ring {
				t := time.AfterFunc(delay, noop)
				if h := handles[j]; h != nil {
					h.Stop()
				}
				handles[j] = t
				if n++; n%128 == 0 {
					counts[g].Store(n)
					if stop.Load() {
						break
					}
				}
			}
			for _, h := range handles {
				if h != nil {
					h.Stop()
				}
			}
		}()
	}
	sum := func() int64 {
		var t int64
		for i := range counts {
			t += counts[i].Load()
		}
		return t
	}
	time.Sleep(warmup)
	n0, c0 := sum(), cpuNow()
	time.Sleep(window)
	n1, c1 := sum(), cpuNow()
	stop.Store(true)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(c1-c0) / float64(n1-n0), nil
}

// ---------------------------------------------------------------------------
// burst: a million timers at once, each recording how late it ran.

// The burst's per-timer figures, in package variables so that a task's
// closure holds its index alone.
var (
	burstBase time.Time
	burstDue  []int64 // nanoseconds since burstBase the timer is due
	burstLate []int64 // how late its task started, in nanoseconds
	burstRan  atomic.Int64
	burstAll  chan struct{}
	burstN    int64
)

func burstTask(i int) func() {
	return func() {
		burstLate[i] = int64(time.Since(burstBase)) - burstDue[i]
		if burstRan.Add(1) == burstN {
			close(burstAll)
		}
	}
}

func burst(fs *flag.FlagSet, quick *bool) func(out *output) (*metrics, error) {
	n := fs.Int("timers", 0, "timers in the burst (default 1M, 100k with -quick)")
	spread := fs.Duration("spread", 0, "each timer is due 1ms plus a uniform share of this after its schedule call (default 2s, 300ms with -quick)")
	gs := fs.Int("goroutines", 2, "goroutines filing the burst")
	return func(out *output) (*metrics, error) {
		if *n == 0 {
			*n = pick(*quick, 1_000_000, 100_000)
		}
		if *spread == 0 {
			*spread = pick(*quick, 2*time.Second, 300*time.Millisecond)
		}
		out.Config["timers"], out.Config["spread"], out.Config["goroutines"] = *n, spread.String(), *gs
		delays := make([]time.Duration, *n)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range delays {
			delays[i] = time.Millisecond + time.Duration(r.Int64N(int64(*spread)))
		}
		burstDue, burstLate, burstN = make([]int64, *n), make([]int64, *n), int64(*n)
		m := newMetrics()
		// shardwheel first, time.AfterFunc after it, as a reference line:
		// the same stdlib on both sides of an A/B, it shows how much the
		// host moved between them.
		for _, impl := range []string{"s.AfterFunc", "time.AfterFunc"} {
			settle()
			cpu, missing, err := burstPhase(impl, *gs, delays, *spread+30*time.Second)
			if err != nil {
				return nil, err
			}
			late := slices.Clone(burstLate[:])
			slices.Sort(late)
			ms := func(q float64) float64 {
				i := min(int(q*float64(len(late))), len(late)-1)
				return float64(late[i]) / 1e6
			}
			m.set(impl+" lateness p50 ms", ms(0.5))
			m.set(impl+" lateness p99 ms", ms(0.99))
			m.set(impl+" lateness p99.9 ms", ms(0.999))
			m.set(impl+" lateness max ms", float64(late[len(late)-1])/1e6)
			m.set(impl+" CPU s", cpu.Seconds())
			if missing > 0 {
				m.set(impl+" not run", float64(missing))
			}
		}
		return m, nil
	}
}

// burstPhase files the burst on impl from gs goroutines and waits for
// every task (at most wait), returning the process's CPU time from the
// first schedule call until the last task ran, and how many did not run.
func burstPhase(impl string, gs int, delays []time.Duration, wait time.Duration) (time.Duration, int64, error) {
	var s *shardwheel.Scheduler
	if impl == "s.AfterFunc" {
		var err error
		if s, err = newScheduler(); err != nil {
			return 0, 0, err
		}
		defer s.Stop()
	}
	clear(burstLate)
	burstRan.Store(0)
	burstAll = make(chan struct{})
	burstBase = time.Now()
	errs := make([]error, gs)
	var wg sync.WaitGroup
	cpu0 := cpuNow()
	for g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(delays); i += gs {
				d := delays[i]
				burstDue[i] = int64(time.Since(burstBase) + d)
				if s == nil {
					time.AfterFunc(d, burstTask(i))
				} else if _, err := s.AfterFunc(d, burstTask(i)); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	select {
	case <-burstAll:
	case <-time.After(wait):
	}
	cpu := cpuNow() - cpu0
	return cpu, burstN - burstRan.Load(), nil
}

// ---------------------------------------------------------------------------
// rate: a timer's CPU cost by the rate a program sets them.

func rate(fs *flag.FlagSet, quick *bool) func(out *output) (*metrics, error) {
	ratesFlag := fs.String("rates", "", "timers set per second, comma-separated (default 10000,100000,1000000; 10000,100000 with -quick)")
	warmup := fs.Duration("warmup", 0, "unmeasured time before each window (default 300ms, 100ms with -quick)")
	window := fs.Duration("window", 0, "measured time per rate and implementation (default 1s, 200ms with -quick)")
	timeout := fs.Duration("timeout", 100*time.Millisecond, "each timer's delay")
	cancelAfter := fs.Duration("cancel-after", 20*time.Millisecond, "each timer is cancelled this long after it was set")
	return func(out *output) (*metrics, error) {
		if *ratesFlag == "" {
			*ratesFlag = pick(*quick, "10000,100000,1000000", "10000,100000")
		}
		var rates []int
		for _, f := range bytes.Split([]byte(*ratesFlag), []byte(",")) {
			r, err := strconv.Atoi(string(bytes.TrimSpace(f)))
			if err != nil || r < 1000 {
				return nil, fmt.Errorf("-rates: %q is not a rate of at least 1000/s", f)
			}
			rates = append(rates, r)
		}
		if *warmup == 0 {
			*warmup = pick(*quick, 300*time.Millisecond, 100*time.Millisecond)
		}
		if *window == 0 {
			*window = pick(*quick, time.Second, 200*time.Millisecond)
		}
		out.Config["rates"], out.Config["warmup"], out.Config["window"] = rates, warmup.String(), window.String()
		out.Config["timeout"], out.Config["cancel_after"] = timeout.String(), cancelAfter.String()
		impls := []string{"baseline", "s.AfterFunc", "time.AfterFunc", "s.WithTimeout", "context.WithTimeout"}
		m := newMetrics()
		for ri, r := range rates {
			cpu, issued := map[string]float64{}, map[string]float64{}
			for k := range impls {
				// Rotated by round and rate, so that no implementation
				// always runs first, or always after the same one.
				impl := impls[(k+out.Round+ri)%len(impls)]
				c, n, err := ratePhase(impl, r, *timeout, *cancelAfter, *warmup, *window)
				if err != nil {
					return nil, err
				}
				cpu[impl], issued[impl] = c, n
			}
			name := fmt.Sprintf("%s/s", siRate(r))
			above := func(impl string) float64 { return cpu[impl] - cpu["baseline"] }
			m.set(name+": baseline CPU ms/s", cpu["baseline"])
			m.set(name+": s.AfterFunc ms/s above baseline", above("s.AfterFunc"))
			m.set(name+": time.AfterFunc ms/s above baseline", above("time.AfterFunc"))
			m.set(name+": s.AfterFunc/time.AfterFunc", posRatio(above("s.AfterFunc"), above("time.AfterFunc")))
			m.set(name+": s.WithTimeout ms/s above baseline", above("s.WithTimeout"))
			m.set(name+": context.WithTimeout ms/s above baseline", above("context.WithTimeout"))
			m.set(name+": s.WithTimeout/context.WithTimeout", posRatio(above("s.WithTimeout"), above("context.WithTimeout")))
			least := math.Inf(1)
			for _, impl := range impls[1:] {
				least = min(least, issued[impl]/float64(r))
			}
			m.set(name+": issued, least share of the rate", least)
		}
		return m, nil
	}
}

func siRate(r int) string {
	switch {
	case r >= 1_000_000 && r%1_000_000 == 0:
		return fmt.Sprintf("%dM", r/1_000_000)
	case r >= 1000 && r%1000 == 0:
		return fmt.Sprintf("%dk", r/1000)
	}
	return strconv.Itoa(r)
}

// maxBehind is how many milliseconds a rate phase may fall behind its
// pace before it drops the timers it missed, as bench's rate command does.
const maxBehind = 2

// ratePhase sets timers on impl at r a second from one goroutine paced
// every millisecond, for warmup and then window, and returns the process's
// CPU time per second of the window in milliseconds, and the timers set
// per second in it.
func ratePhase(impl string, r int, timeout, cancelAfter, warmup, window time.Duration) (float64, float64, error) {
	var s *shardwheel.Scheduler
	if impl == "s.AfterFunc" || impl == "s.WithTimeout" {
		var err error
		if s, err = newScheduler(); err != nil {
			return 0, 0, err
		}
		defer s.Stop()
	}
	settle()
	batch := max(r/1000, 1)
	ring := int(math.Ceil(float64(r)*cancelAfter.Seconds())) + 1 // a timer is cancelled this many sets later
	issue, drain := rateIssuer(impl, s, timeout, ring)
	defer drain()
	start := time.Now()
	measureAt, end := start.Add(warmup), start.Add(warmup+window)
	var c0 time.Duration
	var n int
	measuring := false
	next := start
	for {
		now := time.Now()
		if !measuring && !now.Before(measureAt) {
			// A backlog from the warm-up is not the window's.
			measuring, c0, measureAt, next = true, cpuNow(), now, now.Add(-time.Millisecond)
		}
		if !now.Before(end) {
			break
		}
		for range batch {
			if err := issue(); err != nil {
				return 0, 0, err
			}
		}
		if measuring {
			n += batch
		}
		next = next.Add(time.Millisecond)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		} else if d < -maxBehind*time.Millisecond {
			next = time.Now() // starved: drop what was missed rather than burst
		}
	}
	secs := time.Since(measureAt).Seconds()
	return float64(cpuNow()-c0) / 1e6 / secs, float64(n) / secs, nil
}

// rateIssuer returns a function that sets one timer on impl and cancels
// the one it set ring calls earlier, and one that cancels those left.
func rateIssuer(impl string, s *shardwheel.Scheduler, timeout time.Duration, ring int) (issue func() error, drain func()) {
	i := 0
	noop := func() {}
	switch impl {
	case "context.WithTimeout", "s.WithTimeout":
		cancels := make([]context.CancelFunc, ring)
		with := context.WithTimeout
		if s != nil {
			with = s.WithTimeout
		}
		return func() error {
				if c := cancels[i]; c != nil {
					c()
				}
				_, cancels[i] = with(context.Background(), timeout)
				i = (i + 1) % ring
				return nil
			}, func() {
				for _, c := range cancels {
					if c != nil {
						c()
					}
				}
			}
	case "time.AfterFunc":
		timers := make([]*time.Timer, ring)
		return func() error {
				if t := timers[i]; t != nil {
					t.Stop()
				}
				timers[i] = time.AfterFunc(timeout, noop)
				i = (i + 1) % ring
				return nil
			}, func() {
				for _, t := range timers {
					if t != nil {
						t.Stop()
					}
				}
			}
	case "s.AfterFunc":
		timers := handlesLike(s.AfterFunc(time.Hour, noop))(ring)
		return func() error {
				timers[i].Cancel()
				var err error
				timers[i], err = s.AfterFunc(timeout, noop)
				i = (i + 1) % ring
				return err
			}, func() {
				for _, t := range timers {
					t.Cancel()
				}
			}
	}
	return func() error { return nil }, func() {}
}
