package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/units"
)

// The rate command: what a timer costs at the rate a program sets them.
// A paced loop sets timeouts of Timeout and cancels each CancelAfter
// later (the one it set that many issues earlier), for one implementation
// at a time, and the command reads the process's CPU time over a window;
// a loop paced the same way that sets none is the baseline, measured in
// the same round. Rounds alternate the implementations' order.

// Implementations of the rate curve, and its baseline.
const (
	rateContext   = "context.WithTimeout"
	rateWheelCtx  = "s.WithTimeout"
	rateRuntime   = "time.AfterFunc"
	rateWheelFunc = "s.AfterFunc"
	rateNone      = "baseline"
)

// rateImpls are the implementations, in the first round's order.
var rateImpls = []string{rateNone, rateContext, rateWheelCtx, rateRuntime, rateWheelFunc}

// RateSpec is the rate command's configuration.
type RateSpec struct {
	Rates       []float64     `json:"rates"`
	Timeout     time.Duration `json:"timeout_ns"`
	CancelAfter time.Duration `json:"cancel_after_ns"`
	Window      time.Duration `json:"window_ns"`
	Rounds      int           `json:"rounds"`
	Shards      int           `json:"shards"`
	Tick        time.Duration `json:"tick_ns"`
}

func defaultRateSpec() RateSpec {
	return RateSpec{Rates: []float64{100, 1e3, 1e4, 1e5, 1e6}, Timeout: 100 * time.Millisecond,
		CancelAfter: 20 * time.Millisecond, Window: time.Second, Rounds: 5}
}

// RateResult is one window of one implementation at one rate.
type RateResult struct {
	Impl  string  `json:"impl"`
	Rate  float64 `json:"rate"`
	Round int     `json:"round"`
	// Issued is the timers set per second; CPU the process's CPU time per
	// second of the window; Wakeups the shard goroutines' wake-ups per
	// second per shard (shardwheel only).
	Issued  float64       `json:"issued_per_sec"`
	CPU     time.Duration `json:"cpu_per_sec_ns"`
	Wakeups float64       `json:"wakeups_per_sec_per_shard"`
}

// Rate is the rate command's document.
type Rate struct {
	Host        Host
	Spec        RateSpec
	Runs        []RateResult
	Interrupted bool
}

func (r *Rate) envelope() envelope {
	return envelope{Host: r.Host, Config: r.Spec, Results: r.Runs, Interrupted: r.Interrupted}
}

// rateCommand runs the curve: Rounds rounds, each every rate and
// implementation, the order rotated from round to round.
func rateCommand(ctx context.Context, o options, p *progress) (*Rate, error) {
	r := &Rate{Host: host(), Spec: o.rate}
	r.Spec.Shards, r.Spec.Tick = o.shards, o.tick
	per := r.Spec.Window + 300*time.Millisecond
	pl := newPlan(p, "rate", repeat(per, r.Spec.Rounds*len(r.Spec.Rates)*len(rateImpls)))
	for round := range r.Spec.Rounds {
		for _, rate := range r.Spec.Rates {
			for i := range rateImpls {
				impl := rateImpls[(i+round)%len(rateImpls)]
				if ctx.Err() != nil {
					r.Interrupted = true
					return r, nil
				}
				pl.start(fmt.Sprintf("round %d of %d: %s/s, %s", round+1, r.Spec.Rounds, units.Sig(rate), impl))
				res, err := rateRun(ctx, r.Spec, rate, impl)
				if err != nil {
					return r, err
				}
				if ctx.Err() != nil { // a window cut short is left out
					r.Interrupted = true
					return r, nil
				}
				res.Round = round
				r.Runs = append(r.Runs, res)
			}
		}
	}
	r.Interrupted = ctx.Err() != nil
	return r, nil
}

// rateRun sets timers at rate on impl for a warm-up of 300ms and the
// window, and measures the window.
func rateRun(ctx context.Context, spec RateSpec, rate float64, impl string) (RateResult, error) {
	var s *shardwheel.Scheduler
	if impl == rateWheelCtx || impl == rateWheelFunc {
		var err error
		if s, err = shardwheel.New(wheelOptions(spec.Shards, spec.Tick, false)...); err != nil {
			return RateResult{}, err
		}
		defer s.Stop()
	}
	settle()
	workers := 1
	if rate > 2e4 {
		workers = runtime.GOMAXPROCS(0)
	}
	per := rate / float64(workers)
	// A batch every millisecond at high rates; one timer at a time below
	// 1000/s.
	batch, every := max(int(per/1000), 1), time.Duration(float64(time.Second)/per)
	if batch > 1 {
		every = time.Millisecond
	}
	ring := int(math.Ceil(per*spec.CancelAfter.Seconds())) + 1
	start := time.Now()
	measureAt, end := start.Add(300*time.Millisecond), start.Add(300*time.Millisecond+spec.Window)
	counts := make([]int, workers)
	done := make(chan error, workers)
	type mark struct {
		cpu     time.Duration
		wakeups uint64
	}
	read := func() mark {
		m := mark{cpu: cpuTime()}
		if s != nil {
			m.wakeups = s.Stats().Total.Wakeups
		}
		return m
	}
	marks := make(chan mark, 2)
	for w := range workers {
		go func() {
			issue := rateIssuer(impl, s, spec.Timeout, ring)
			next, n, measuring := time.Now(), 0, false
			for {
				now := time.Now()
				if !measuring && !now.Before(measureAt) {
					measuring = true
					next = now.Add(-every) // a backlog from the warm-up is not the window's
					if w == 0 {
						marks <- read()
					}
				}
				if !now.Before(end) || ctx.Err() != nil {
					counts[w] = n
					done <- nil
					return
				}
				for range batch {
					if err := issue(); err != nil {
						done <- err
						return
					}
					if measuring {
						n++
					}
				}
				next = next.Add(every)
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				} else if d < -maxBehind*every {
					// Starved: drop what was missed rather than
					// issue it in a burst, which the window would
					// count as a rate above the one asked.
					next = time.Now()
				}
			}
		}()
	}
	var err error
	for range workers {
		if e := <-done; e != nil && err == nil {
			err = e
		}
	}
	last := read()
	var first mark
	select {
	case first = <-marks:
	default: // interrupted before the window began: nothing measured
		return RateResult{Impl: impl, Rate: rate}, err
	}
	secs := time.Since(measureAt).Seconds()
	total := 0
	for _, c := range counts {
		total += c
	}
	res := RateResult{Impl: impl, Rate: rate, Issued: float64(total) / secs,
		CPU: time.Duration(float64(last.cpu-first.cpu) / secs)}
	if s != nil {
		res.Wakeups = float64(last.wakeups-first.wakeups) / secs / float64(s.Shards())
	}
	return res, err
}

// maxBehind is how many pacing periods a rate worker may fall behind
// before it drops the timers it missed: it catches up on a short stall
// (a sleep that overslept), never in a burst, so a window issues at most
// maxBehind+1 periods more than its rate.
const maxBehind = 2

// rateIssuer returns a function that sets one timer on impl and cancels
// the one it set ring calls earlier.
func rateIssuer(impl string, s *shardwheel.Scheduler, timeout time.Duration, ring int) func() error {
	i := 0
	noop := func() {}
	switch impl {
	case rateContext, rateWheelCtx:
		cancels := make([]context.CancelFunc, ring)
		return func() error {
			if c := cancels[i]; c != nil {
				c()
			}
			if impl == rateContext {
				_, cancels[i] = context.WithTimeout(context.Background(), timeout)
			} else {
				_, cancels[i] = s.WithTimeout(context.Background(), timeout)
			}
			i = (i + 1) % ring
			return nil
		}
	case rateRuntime:
		timers := make([]*time.Timer, ring)
		return func() error {
			if t := timers[i]; t != nil {
				t.Stop()
			}
			timers[i] = time.AfterFunc(timeout, noop)
			i = (i + 1) % ring
			return nil
		}
	case rateWheelFunc:
		timers := make([]shardwheel.Timer, ring)
		return func() error {
			timers[i].Cancel()
			var err error
			timers[i], err = s.AfterFunc(timeout, noop)
			i = (i + 1) % ring
			return err
		}
	}
	return func() error { return nil }
}

// rateMedian returns the median over the rounds of impl's CPU per second
// above the same round's baseline at rate, with the range, in ms/s; and
// the median wake-ups and issue rate.
func (r *Rate) rateMedian(impl string, rate float64) (cpu, lo, hi, wakeups, issued float64, ok bool) {
	base := map[int]time.Duration{}
	for _, x := range r.Runs {
		if x.Impl == rateNone && x.Rate == rate {
			base[x.Round] = x.CPU
		}
	}
	var cpus, wakes, iss []float64
	for _, x := range r.Runs {
		if b, found := base[x.Round]; found && x.Impl == impl && x.Rate == rate {
			cpus = append(cpus, float64(x.CPU-b)/1e6)
			wakes = append(wakes, x.Wakeups)
			iss = append(iss, x.Issued)
		}
	}
	if len(cpus) == 0 {
		return 0, 0, 0, 0, 0, false
	}
	cpu, lo, hi = medianRange(cpus)
	wakeups, _, _ = medianRange(wakes)
	issued, _, _ = medianRange(iss)
	return cpu, lo, hi, wakeups, issued, true
}

func (r *Rate) writeText(w io.Writer) error {
	fmt.Fprintf(w, "rate: timeouts of %s, each cancelled %s later; process CPU per second above a loop paced the same way that "+
		"sets none (ms/s: median of %d rounds [min, max], implementations alternating); shardwheel: %d shards, tick %s\n\n",
		units.Duration(r.Spec.Timeout), units.Duration(r.Spec.CancelAfter), r.Spec.Rounds, r.Spec.Shards, units.Duration(r.Spec.Tick))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "timers/s\tcontext.WithTimeout\ts.WithTimeout\tratio\ttime.AfterFunc\ts.AfterFunc\tratio\twake-ups/s per shard\t")
	cell := func(impl string, rate float64) (string, float64) {
		c, lo, hi, _, issued, ok := r.rateMedian(impl, rate)
		if !ok {
			return "-", math.NaN()
		}
		s := fmt.Sprintf("%.2f [%.2f, %.2f]", c, lo, hi)
		if issued < 0.95*rate {
			s += fmt.Sprintf(" (%s/s issued)", units.Sig(issued))
		}
		return s, c
	}
	ratio := func(a, b float64) string {
		if math.IsNaN(a) || math.IsNaN(b) || b <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	for _, rate := range r.Spec.Rates {
		ctxCell, ctxCPU := cell(rateContext, rate)
		wctxCell, wctxCPU := cell(rateWheelCtx, rate)
		rtCell, rtCPU := cell(rateRuntime, rate)
		wfCell, wfCPU := cell(rateWheelFunc, rate)
		_, _, _, wk1, _, _ := r.rateMedian(rateWheelCtx, rate)
		_, _, _, wk2, _, _ := r.rateMedian(rateWheelFunc, rate)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f, %.1f\t\n", units.Sig(rate), ctxCell, wctxCell, ratio(wctxCPU, ctxCPU),
			rtCell, wfCell, ratio(wfCPU, rtCPU), wk1, wk2)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\nA ratio below 1.00x is shardwheel's saving; where the CPU above the baseline is a fraction of a ms/s, "+
		"or the ranges overlap, the difference is noise.")
	return err
}
