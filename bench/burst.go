package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/hist"
	"github.com/shardwheel/shardwheel/internal/units"
)

// BurstSpec is the burst workload: Timers timers scheduled as fast as
// Producers goroutines can, each due DelayMin plus a uniform share of
// Spread after its Schedule call.
type BurstSpec struct {
	Timers    int           `json:"timers"`
	Producers int           `json:"producers"`
	DelayMin  time.Duration `json:"delay_min_ns"`
	Spread    time.Duration `json:"spread_ns"`
	Tick      time.Duration `json:"tick_ns"`
	Shards    int           `json:"shards"`
	Affinity  bool          `json:"affinity,omitempty"`
	Runs      int           `json:"runs"`
}

// Burst is the burst command's document.
type Burst struct {
	Host        Host          `json:"host"`
	Spec        BurstSpec     `json:"spec"`
	Runs        []BurstResult `json:"runs"` // in the order they ran
	Interrupted bool          `json:"interrupted,omitempty"`
}

// BurstResult is one run of one implementation.
type BurstResult struct {
	Impl string `json:"impl"`
	// Lateness is, over every timer, the time its task started minus
	// (the clock reading taken just before its Schedule call + its
	// delay): what the code that set the timer sees. Exact, not binned.
	Lateness hist.Percentiles `json:"lateness"`
	// Early counts tasks that started before that deadline, Doubles
	// tasks that ran more than once, Missing timers that never ran.
	Early   int `json:"early"`
	Doubles int `json:"doubles"`
	Missing int `json:"missing"`
	// GoroutinesPeak is the most goroutines seen (sampled every ms).
	GoroutinesPeak int `json:"goroutines_peak"`
	// CPU is the process's CPU time from the first Schedule to the last
	// task, producers included; Wall the elapsed time.
	CPU  time.Duration `json:"cpu_ns"`
	Wall time.Duration `json:"wall_ns"`
	// Stats is shardwheel's own view of the run (nil for AfterFunc).
	Stats *burstStats `json:"stats,omitempty"`
}

// burstStats is what shardwheel's Stats said about a run.
type burstStats struct {
	Lateness    hist.Percentiles    `json:"lateness"`
	TickLag     hist.Percentiles    `json:"tick_lag"`
	PassTime    hist.Percentiles    `json:"pass_time"`
	SlowestPass shardwheel.PassWork `json:"slowest_pass"`
	RefiledPeak int                 `json:"refiled_peak"`
}

// burst runs the burst workload on shardwheel and on time.AfterFunc, one
// run of each in turn, Runs times.
func burst(ctx context.Context, o options, p *progress) (*Burst, error) {
	b := &Burst{Host: host(), Spec: o.burst}
	b.Spec.Tick, b.Spec.Shards, b.Spec.Affinity = o.tick, o.shards, o.affinity
	for run := 0; run < b.Spec.Runs && ctx.Err() == nil; run++ {
		for _, impl := range []string{nameWheel, nameStdlib} {
			if ctx.Err() != nil {
				break
			}
			p.note("burst: run %d/%d, %s", run+1, b.Spec.Runs, impl)
			r, err := burstRun(ctx, b.Spec, impl)
			if err != nil {
				return b, err
			}
			b.Runs = append(b.Runs, r)
			settle()
		}
	}
	b.Interrupted = ctx.Err() != nil
	return b, nil
}

// burstRun runs the workload once on impl.
func burstRun(ctx context.Context, spec BurstSpec, impl string) (BurstResult, error) {
	r := BurstResult{Impl: impl}
	schedule := func(d time.Duration, f func()) error { time.AfterFunc(d, f); return nil }
	var s *shardwheel.Scheduler
	if impl == nameWheel {
		var err error
		s, err = shardwheel.New(append(wheelOptions(spec.Shards, spec.Tick, spec.Affinity),
			shardwheel.WithMaxPending(spec.Timers+1))...)
		if err != nil {
			return r, err
		}
		defer s.Stop()
		schedule = func(d time.Duration, f func()) error {
			_, err := s.AfterFunc(d, f)
			return err
		}
	}
	base := time.Now()
	now := func() time.Duration { return time.Since(base) }
	due := make([]time.Duration, spec.Timers)
	late := make([]time.Duration, spec.Timers)
	runs := make([]atomic.Int32, spec.Timers)
	var fired atomic.Int64
	done := make(chan struct{})

	stopSampling := sampleGoroutines(&r.GoroutinesPeak)
	cpu0 := cpuTime()
	var wg sync.WaitGroup
	errs := make(chan error, spec.Producers)
	for pi := range spec.Producers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(pi), 42))
			for i := pi; i < spec.Timers; i += spec.Producers {
				d := spec.DelayMin + time.Duration(rng.Int64N(int64(spec.Spread)+1))
				due[i] = now() + d
				err := schedule(d, func() {
					if runs[i].Add(1) == 1 {
						late[i] = now() - due[i]
						if fired.Add(1) == int64(spec.Timers) {
							close(done)
						}
					}
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		stopSampling()
		return r, err
	}
	limit := time.NewTimer(spec.DelayMin + spec.Spread + 30*time.Second)
	defer limit.Stop()
	select {
	case <-done:
	case <-limit.C:
	case <-ctx.Done():
	}
	r.Wall, r.CPU = now(), cpuTime()-cpu0
	stopSampling()

	var sorted []time.Duration
	for i := range late {
		switch n := runs[i].Load(); {
		case n == 0:
			r.Missing++
			continue
		case n > 1:
			r.Doubles++
		}
		if late[i] < 0 {
			r.Early++
		}
		sorted = append(sorted, late[i])
	}
	r.Lateness = exactPercentiles(sorted)
	if s != nil {
		st := s.Stats().Total
		r.Stats = &burstStats{
			Lateness: percentiles(st.Lateness), TickLag: percentiles(st.TickLag),
			PassTime: percentiles(st.PassTime), SlowestPass: st.SlowestPass, RefiledPeak: st.RefiledPeak,
		}
	}
	return r, ctx.Err()
}

// sampleGoroutines records the most goroutines seen into peak, every
// millisecond until the returned stop is called.
func sampleGoroutines(peak *int) (stop func()) {
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			*peak = max(*peak, runtime.NumGoroutine())
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(quit); <-exited }
}

// percentiles summarizes one of shardwheel's histograms.
func percentiles(h shardwheel.Histogram) hist.Percentiles {
	return hist.Percentiles{
		P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99), P999: h.Quantile(0.999),
		Max: h.Max(), Count: h.Count(),
	}
}

// exactPercentiles returns the percentiles of v, which it sorts.
func exactPercentiles(v []time.Duration) hist.Percentiles {
	if len(v) == 0 {
		return hist.Percentiles{}
	}
	slices.Sort(v)
	at := func(q float64) time.Duration { return v[min(int(q*float64(len(v))), len(v)-1)] }
	return hist.Percentiles{P50: at(0.5), P90: at(0.9), P99: at(0.99), P999: at(0.999), Max: v[len(v)-1], Count: uint64(len(v))}
}

// summary returns the median of f over impl's runs and its range, and
// false if impl has no run.
func (b *Burst) summary(impl string, f func(r *BurstResult) float64) (med, lo, hi float64, ok bool) {
	var v []float64
	for i := range b.Runs {
		if b.Runs[i].Impl == impl {
			v = append(v, f(&b.Runs[i]))
		}
	}
	if len(v) == 0 {
		return 0, 0, 0, false
	}
	med, lo, hi = medianRange(v)
	return med, lo, hi, true
}

// writeText writes one row per figure: the median over the runs of each
// implementation, its range, and the ratio.
func (b *Burst) writeText(w io.Writer) error {
	sp := b.Spec
	fmt.Fprintf(w, "burst: %d timers from %d goroutines, each due %v + uniform [0, %v] after its call; "+
		"shardwheel %d shards, %v tick%s; %d runs each, interleaved\n%s\n\n",
		sp.Timers, sp.Producers, sp.DelayMin, sp.Spread, sp.Shards, sp.Tick, affinityNote(sp.Affinity), sp.Runs, b.Host)
	dur := func(f func(r *BurstResult) time.Duration) func(r *BurstResult) float64 {
		return func(r *BurstResult) float64 { return float64(f(r)) }
	}
	showDur := func(v float64) string { return units.Duration(time.Duration(v)) }
	showInt := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	rows := []struct {
		label string
		f     func(r *BurstResult) float64
		show  func(float64) string
	}{
		{"lateness p50", dur(func(r *BurstResult) time.Duration { return r.Lateness.P50 }), showDur},
		{"lateness p99", dur(func(r *BurstResult) time.Duration { return r.Lateness.P99 }), showDur},
		{"lateness p99.9", dur(func(r *BurstResult) time.Duration { return r.Lateness.P999 }), showDur},
		{"lateness max", dur(func(r *BurstResult) time.Duration { return r.Lateness.Max }), showDur},
		{"early fires", func(r *BurstResult) float64 { return float64(r.Early) }, showInt},
		{"ran twice", func(r *BurstResult) float64 { return float64(r.Doubles) }, showInt},
		{"never ran", func(r *BurstResult) float64 { return float64(r.Missing) }, showInt},
		{"goroutines peak", func(r *BurstResult) float64 { return float64(r.GoroutinesPeak) }, showInt},
		{"CPU", dur(func(r *BurstResult) time.Duration { return r.CPU }), showDur},
	}
	t := &table{}
	t.add("median (min-max)", nameWheel, nameStdlib, "ratio")
	for _, row := range rows {
		cells := []string{row.label}
		var meds [2]float64
		for i, impl := range []string{nameWheel, nameStdlib} {
			m, lo, hi, ok := b.summary(impl, row.f)
			if !ok {
				cells = append(cells, "n/a")
				continue
			}
			meds[i] = m
			cells = append(cells, fmt.Sprintf("%s (%s-%s)", row.show(m), row.show(lo), row.show(hi)))
		}
		ratio := "-"
		if meds[1] > 0 {
			ratio = fmt.Sprintf("%.2fx", meds[0]/meds[1])
		}
		t.add(append(cells, ratio)...)
	}
	if err := t.write(w); err != nil {
		return err
	}
	for i := range b.Runs {
		r := &b.Runs[i]
		if r.Stats == nil {
			continue
		}
		st := r.Stats
		fmt.Fprintf(w, "\nshardwheel run: Stats lateness p50/p99/max %s/%s/%s (tasks saw %s/%s/%s); "+
			"tick lag p99 %s; pass time p99 %s; slowest pass %s (%d transferred, %d re-filed, %d run)",
			units.Duration(st.Lateness.P50), units.Duration(st.Lateness.P99), units.Duration(st.Lateness.Max),
			units.Duration(r.Lateness.P50), units.Duration(r.Lateness.P99), units.Duration(r.Lateness.Max),
			units.Duration(st.TickLag.P99), units.Duration(st.PassTime.P99), units.Duration(st.SlowestPass.Duration),
			st.SlowestPass.Transferred, st.SlowestPass.Refiled, st.SlowestPass.Fired)
	}
	_, err := fmt.Fprintln(w)
	return err
}
