package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/hist"
	"github.com/shardwheel/shardwheel/internal/units"
	"github.com/shardwheel/shardwheel/stats"
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
	Host        Host
	Spec        BurstSpec
	Runs        []BurstResult // in the order they ran
	Interrupted bool
}

// burstResults is burst's results in the JSON envelope.
type burstResults struct {
	// Runs are every finished run, in the order they ran.
	Runs []BurstResult `json:"runs"`
	// Summaries are each implementation's medians and ranges over its
	// runs, by row key.
	Summaries map[string]map[string]spread `json:"summaries"`
}

// envelope is burst's JSON document.
func (b *Burst) envelope() envelope {
	sums := map[string]map[string]spread{}
	for _, impl := range []string{nameWheel, nameStdlib} {
		for _, row := range burstRows() {
			if m, lo, hi, ok := b.summary(impl, row.f); ok {
				if sums[impl] == nil {
					sums[impl] = map[string]spread{}
				}
				sums[impl][row.key] = spread{m, lo, hi}
			}
		}
	}
	v := b.verdict()
	return envelope{Host: b.Host, Config: b.Spec, Results: burstResults{Runs: b.Runs, Summaries: sums}, Verdict: &v, Interrupted: b.Interrupted}
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
	Lateness    hist.Percentiles `json:"lateness"`
	TickLag     hist.Percentiles `json:"tick_lag"`
	PassTime    hist.Percentiles `json:"pass_time"`
	SlowestPass stats.Pass       `json:"slowest_pass"`
	RefiledPeak int              `json:"refiled_peak"`
}

// burst runs the burst workload on shardwheel and on time.AfterFunc, one
// run of each in turn, Runs times.
func burst(ctx context.Context, o options, p *progress) (*Burst, error) {
	b := &Burst{Host: host(), Spec: o.burst}
	b.Spec.Tick, b.Spec.Shards, b.Spec.Affinity = o.tick, o.shards, o.affinity
	// A run: scheduling (about a microsecond a timer), then the spread.
	expect := time.Duration(b.Spec.Timers)*time.Microsecond + b.Spec.DelayMin + b.Spec.Spread + 500*time.Millisecond
	pl := newPlan(p, "burst", repeat(expect, 2*b.Spec.Runs))
	for run := 0; run < b.Spec.Runs && ctx.Err() == nil; run++ {
		for _, impl := range []string{nameWheel, nameStdlib} {
			if ctx.Err() != nil {
				break
			}
			pl.start(fmt.Sprintf("run %d of %d: %s", run+1, b.Spec.Runs, impl))
			r, err := burstRun(ctx, b.Spec, impl)
			if ctx.Err() != nil {
				break // an interrupted run is incomplete: it is left out
			}
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
	return r, nil
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
func percentiles(h stats.Histogram) hist.Percentiles {
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

// burstRow is one row of the burst report.
type burstRow struct {
	key, label string
	// better is "lower", or "" for a count that must be 0 and rates
	// nothing.
	better string
	f      func(r *BurstResult) float64
	show   func(float64) string
}

// burstRows are the rows of the burst report, in order.
func burstRows() []burstRow {
	dur := func(f func(r *BurstResult) time.Duration) func(r *BurstResult) float64 {
		return func(r *BurstResult) float64 { return float64(f(r)) }
	}
	showInt := func(v float64) string { return groupDigits(int(math.Round(v))) }
	return []burstRow{
		{"lateness_p50", "lateness p50", "lower", dur(func(r *BurstResult) time.Duration { return r.Lateness.P50 }), showDur},
		{"lateness_p99", "lateness p99", "lower", dur(func(r *BurstResult) time.Duration { return r.Lateness.P99 }), showDur},
		{"lateness_p999", "lateness p99.9", "lower", dur(func(r *BurstResult) time.Duration { return r.Lateness.P999 }), showDur},
		{"lateness_max", "lateness max", "lower", dur(func(r *BurstResult) time.Duration { return r.Lateness.Max }), showDur},
		{"early", "early fires (must be 0)", "", func(r *BurstResult) float64 { return float64(r.Early) }, showInt},
		{"doubles", "ran twice (must be 0)", "", func(r *BurstResult) float64 { return float64(r.Doubles) }, showInt},
		{"missing", "never ran (must be 0)", "", func(r *BurstResult) float64 { return float64(r.Missing) }, showInt},
		{"goroutines_peak", "goroutines peak", "lower", func(r *BurstResult) float64 { return float64(r.GoroutinesPeak) }, showInt},
		{"cpu", "CPU", "lower", dur(func(r *BurstResult) time.Duration { return r.CPU }), showDur},
	}
}

// burstNoise says why the lateness rows rest on too few timers, or "".
func (b *Burst) burstNoise() string {
	if b.Spec.Timers < minSamples {
		return plural(b.Spec.Timers, "timer")
	}
	return ""
}

// writeText writes one row per figure: the median over the runs of each
// implementation, its range, the ratio and the winner; then the verdict.
func (b *Burst) writeText(w io.Writer) error {
	sp := b.Spec
	runs := plural(sp.Runs, "run") + " of each"
	if sp.Runs > 1 {
		runs += ", interleaved"
	}
	fmt.Fprintf(w, "burst: %s timers from %s, each due %v + uniform [0, %v] after its call; "+
		"shardwheel (s.AfterFunc): %s, %v tick%s; %s\n%s\n\n",
		groupDigits(sp.Timers), plural(sp.Producers, "goroutine"), sp.DelayMin, sp.Spread, plural(sp.Shards, "shard"), sp.Tick,
		affinityNote(sp.Affinity), runs, b.Host)
	head := "median (min-max)"
	if sp.Runs == 1 {
		head = "one run"
	}
	t := &table{align: "lrrrl"}
	t.add(head, nameWheel, nameStdlib, "ratio", "winner")
	for _, row := range burstRows() {
		cells := []string{row.label}
		var cs []candidate
		var meds [2]float64
		var have [2]bool
		for i, impl := range []string{nameWheel, nameStdlib} {
			m, lo, hi, ok := b.summary(impl, row.f)
			if !ok {
				cells = append(cells, "n/a")
				continue
			}
			meds[i], have[i] = m, true
			cells = append(cells, withRange(row.show, m, lo, hi))
			cs = append(cs, candidate{name: impl, med: m, lo: lo, hi: hi, ok: true})
		}
		q := ""
		if row.better != "" && have[0] && have[1] {
			r, ok := ratio(meds[0], meds[1])
			q = fmtRatio(r, ok)
		}
		win := pickWinner(row.better, cs...)
		if n := b.burstNoise(); n != "" && win != "" && strings.HasPrefix(row.key, "lateness") {
			win = winNoise + ": " + n
		}
		t.add(append(cells, q, win)...)
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
	var sb strings.Builder
	sb.WriteString("\n\nratio = shardwheel / time.AfterFunc. Lateness: task start - (clock read before the call + delay).\n")
	fmt.Fprintf(&sb, "winner: the lower figure; \"tie\" within %.0f%% or where the runs' ranges overlap.\n", 100*tieWithin)
	if b.Interrupted {
		sb.WriteString("INTERRUPTED: the figures cover the runs that finished.\n")
	}
	writeVerdict(&sb, b.verdict())
	_, err := io.WriteString(w, sb.String())
	return err
}

// verdict sums up the burst: shardwheel's lateness and CPU against
// time.AfterFunc's, and whether every timer ran once, never early.
func (b *Burst) verdict() Verdict {
	v := Verdict{Ratios: map[string]float64{}, Winners: map[string]string{}}
	var parts []string
	for _, row := range burstRows() {
		sw, slo, shi, ok1 := b.summary(nameWheel, row.f)
		af, alo, ahi, ok2 := b.summary(nameStdlib, row.f)
		if !ok1 || !ok2 || row.better == "" {
			continue
		}
		v.Winners[row.key] = pickWinner(row.better, candidate{nameWheel, sw, slo, shi, true}, candidate{nameStdlib, af, alo, ahi, true})
		q, ok := ratio(sw, af)
		if ok {
			v.Ratios[row.key] = q
		}
		switch row.key {
		case "lateness_p50":
			parts = append(parts, "lateness p50 "+lateDiff(time.Duration(sw), time.Duration(af), b.Spec.Tick, q, ok))
		case "lateness_p99", "lateness_max", "cpu":
			parts = append(parts, fmt.Sprintf("%s %s", strings.TrimPrefix(row.label, "lateness "), fmtRatio(q, ok)))
		case "goroutines_peak":
			parts = append(parts, fmt.Sprintf("goroutines peak %s vs %s", groupDigits(int(sw)), groupDigits(int(af))))
		}
	}
	if len(parts) == 0 {
		return v
	}
	line := fmt.Sprintf("burst of %s timers, shardwheel (s.AfterFunc) against time.AfterFunc: %s", groupDigits(b.Spec.Timers), strings.Join(parts, ", "))
	if n := b.burstNoise(); n != "" {
		line += " (lateness: noise, " + n + ")"
	}
	v.Summary = append(v.Summary, line+".")
	var early, doubles, missing int
	for _, r := range b.Runs {
		early, doubles, missing = early+r.Early, doubles+r.Doubles, missing+r.Missing
	}
	if early+doubles+missing == 0 {
		v.Summary = append(v.Summary, "Every timer ran exactly once, none early, in every run.")
	} else {
		v.Summary = append(v.Summary, fmt.Sprintf("ERROR: over the runs, %s ran early, %d twice, %d never.", plural(early, "timer"), doubles, missing))
	}
	return v
}
