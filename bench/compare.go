package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/units"
)

// Comparison is the outcome of compare: the proxy-shaped load, with the
// same seed, against shardwheel, alone (null) and against time.AfterFunc
// in one process; then, unless -churn-rounds is 0, the delayed-cancel
// churn load (see churn.go).
type Comparison struct {
	Host     Host
	Load     Load
	Shards   int
	Tick     time.Duration
	Affinity bool
	// Results are shardwheel's and time.AfterFunc's, with their Library
	// set when LoadAlone was measured.
	Results []Result
	// LoadAlone is the run of the load through null, which does no timer
	// work: its CPU per call is what Library subtracts. It holds no
	// timers, so its lateness is empty and its heap and resident count
	// are the load's bookkeeping only.
	LoadAlone *Result
	// Keyed is set when both implementations were driven by key (-keyed).
	Keyed bool
	// Ratios are shardwheel / time.AfterFunc by metric.
	Ratios map[string]float64
	// ChurnConfig is the churn section's load; Churn its results, nil
	// when the section was left out (-churn-rounds 0).
	ChurnConfig ChurnConfig
	Churn       *ChurnResults
	Interrupted bool
}

// compareConfig is compare's config in the JSON envelope.
type compareConfig struct {
	Load     Load          `json:"load"`
	Keyed    bool          `json:"keyed"`
	Shards   int           `json:"shards"`
	Tick     time.Duration `json:"tick_ns"`
	Affinity bool          `json:"affinity,omitempty"`
	// Churn is the churn section's load; null when it was left out.
	Churn *ChurnConfig `json:"churn"`
}

// compareResults is compare's results in the JSON envelope.
type compareResults struct {
	// Runs are shardwheel's and time.AfterFunc's runs of the
	// proxy-shaped load; LoadAlone the load's own run.
	Runs      []Result           `json:"runs"`
	LoadAlone *Result            `json:"load_alone,omitempty"`
	Ratios    map[string]float64 `json:"ratios,omitempty"`
	Churn     *ChurnResults      `json:"churn,omitempty"`
}

// envelope is compare's JSON document: the proxy-shaped load and, when
// run, the churn section, and the verdict on both.
func (c *Comparison) envelope() envelope {
	cfg := compareConfig{Load: c.Load, Keyed: c.Keyed, Shards: c.Shards, Tick: c.Tick, Affinity: c.Affinity}
	if c.ChurnConfig.Rounds > 0 {
		cfg.Churn = &c.ChurnConfig
	}
	v := c.verdict()
	return envelope{Host: c.Host, Config: cfg, Verdict: &v, Interrupted: c.Interrupted,
		Results: compareResults{Runs: c.Results, LoadAlone: c.LoadAlone, Ratios: c.Ratios, Churn: c.Churn}}
}

// expectLoadRun is about how long one run of the proxy-shaped load takes:
// prefill, warm-up, the window, the heap's collection and the teardown.
func expectLoadRun(l Load) time.Duration {
	return time.Duration(l.population().total())*time.Microsecond + l.Warmup + l.Duration + time.Second
}

// compare runs o's load against shardwheel, alone, then against
// time.AfterFunc, one after the other: the load alone runs between the
// two it is subtracted from, so that a slow spell of the host over the
// three runs weighs on both subtractions alike. Then it runs the churn
// section. When ctx is done it returns what was measured so far.
func compare(ctx context.Context, o options, p *progress) (*Comparison, error) {
	c := &Comparison{Host: host(), Load: o.load, Shards: o.shards, Tick: o.tick, Affinity: o.affinity, Keyed: o.keyed, ChurnConfig: o.churn}
	spec := runSpec{load: o.load, shards: o.shards, tick: o.tick, affinity: o.affinity, keyed: o.keyed, progress: p}
	expect := repeat(expectLoadRun(o.load), 3)
	expect = append(expect, repeat(o.churn.expectRun(), o.churn.runs())...)
	pl := newPlan(p, "compare", expect)
	wheelCall := callWheel
	if o.keyed {
		wheelCall = callWheelKeyed
	}
	for _, run := range []struct {
		label string
		f     func(context.Context, runSpec) (Result, error)
	}{{nameWheel + " (" + wheelCall + ")", runWheel}, {nameNull, runNull}, {nameStdlib, runStdlib}} {
		if ctx.Err() != nil {
			break
		}
		pl.start("proxy-shaped load: " + run.label)
		r, err := run.f(ctx, spec)
		if err != nil {
			return c, err
		}
		switch {
		case r.Measured == 0:
		case r.Impl == nameNull:
			c.LoadAlone = &r
		default:
			c.Results = append(c.Results, r)
		}
		settle()
	}
	if c.LoadAlone != nil {
		for i := range c.Results {
			c.Results[i].Library = libraryCost(&c.Results[i], c.LoadAlone)
		}
	}
	if len(c.Results) == 2 {
		c.Ratios = ratios(reportRows(true), &c.Results[0], &c.Results[1])
	}
	if o.churn.Rounds > 0 && ctx.Err() == nil {
		res, err := churnCompare(ctx, o.churn, pl, p.w)
		c.Churn = res
		if err != nil {
			c.Interrupted = ctx.Err() != nil
			return c, err
		}
	}
	c.Interrupted = ctx.Err() != nil
	return c, nil
}

// settle returns the previous run's memory, so that the next run starts
// from the same heap and does not pay for its predecessor's garbage.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

// find returns the result of impl, or nil if it was not measured.
func (c *Comparison) find(impl string) *Result {
	for i := range c.Results {
		if c.Results[i].Impl == impl {
			return &c.Results[i]
		}
	}
	return nil
}

// writeText writes the comparison as a table with notes, the churn
// section, and the verdict.
func (c *Comparison) writeText(w io.Writer) error {
	sw, af := c.find(nameWheel), c.find(nameStdlib)
	var b strings.Builder
	fmt.Fprintf(&b, "shardwheel vs time.AfterFunc on %s\n\n", c.Host)
	b.WriteString("== a proxy-shaped load\n")
	c.Load.describe(&b)
	fmt.Fprintf(&b, "measured %v per implementation and for the load alone, after %v warm-up each; %s; seed %d",
		c.Load.Duration, c.Load.Warmup, plural(c.Load.Workers, "load goroutine"), c.Load.Seed)
	fmt.Fprintf(&b, "; shardwheel: %s, tick %v%s\n", plural(c.Shards, "shard"), c.Tick, affinityNote(c.Affinity))
	if c.Keyed {
		b.WriteString("calls, by key: shardwheel ix.AfterFunc, ix.Cancel, ix.Reset (an Index); time.AfterFunc through a sync.Map of timers\n")
	} else {
		b.WriteString("calls: shardwheel s.AfterFunc (no key), Timer.Cancel, Timer.Reset; time.AfterFunc, Timer.Stop, Timer.Reset\n")
	}
	b.WriteString("\n")

	t := &table{align: "lrrrl"}
	t.add("", nameWheel, nameStdlib, "ratio", "winner")
	addRows(t, reportRows(true), c.Ratios, []string{nameWheel, nameStdlib}, sw, af)
	if err := t.write(&b); err != nil {
		return err
	}
	if r := c.LoadAlone; r != nil {
		fmt.Fprintf(&b, "load alone (no timer work): CPU %s (%s cores busy), %s calls/s, %s per call\n",
			units.Duration(r.CPU), units.Sig(r.CPU.Seconds()/r.Measured.Seconds()), units.SI(r.OpsPerSec),
			units.Duration(time.Duration(r.CPUPerOp)))
	}
	b.WriteString("\n")
	for _, n := range c.notes(sw, af) {
		b.WriteString(n + "\n")
	}
	if c.ChurnConfig.Rounds > 0 {
		b.WriteString("\n== delayed-cancel churn (go run ./bench churn runs it alone)\n")
		if c.Churn != nil {
			if err := writeChurnSection(&b, c.ChurnConfig, c.Churn, c.Interrupted); err != nil {
				return err
			}
		} else {
			b.WriteString("INTERRUPTED: not run.\n")
		}
	}
	writeVerdict(&b, c.verdict())
	_, err := io.WriteString(w, b.String())
	return err
}

// addRows adds rows to t under their group headings: one column per
// result (nil for one not measured, named by names), then the ratio of
// the first to the second and the winner.
func addRows[R any](t *table, rows []metric[R], ratios map[string]float64, names []string, results ...*R) {
	group := ""
	for _, m := range rows {
		if m.group != group {
			group = m.group
			t.add(group)
		}
		cells := []string{"  " + m.label}
		for _, r := range results {
			cells = append(cells, cell(m, r))
		}
		q := ""
		if r, ok := ratios[m.key]; ok {
			q = fmtRatio(r, true)
		} else if m.key != "" && len(results) == 2 && results[0] != nil && results[1] != nil {
			q = "n/a"
		}
		t.add(append(cells, q, rowWinner(m, names, results))...)
	}
}

// rowWinner names the result that did better on m, "tie", or "noise"
// with the reason when a result's figure rests on too few samples; ""
// for rows that rate nothing or lack a result.
func rowWinner[R any](m metric[R], names []string, results []*R) string {
	if m.better == "" {
		return ""
	}
	var cs []candidate
	for i, r := range results {
		if r == nil {
			return ""
		}
		v, ok := m.value(r)
		cs = append(cs, candidate{name: names[i], med: v, lo: v, hi: v, ok: ok})
	}
	if m.noise != nil {
		for _, r := range results {
			if why := m.noise(r); why != "" {
				return winNoise + ": " + why
			}
		}
	}
	return pickWinner(m.better, cs...)
}

// cell shows m for r, or "-" when r was not measured.
func cell[R any](m metric[R], r *R) string {
	if r == nil {
		return "-"
	}
	return m.show(r)
}

// notes explain how to read the table, and what went wrong if anything.
func (c *Comparison) notes(sw, af *Result) []string {
	notes := []string{
		"ratio = shardwheel / time.AfterFunc. winner: the better figure (lower, except for rates); \"tie\" within " + fmt.Sprintf("%.0f%%", 100*tieWithin) + ";",
		fmt.Sprintf("  \"noise\" where a figure rests on fewer than %d samples (percentiles) or %d GC cycles, or is the library's", minSamples, minGCCycles),
		"  CPU within the subtraction's noise (one run each: a rerun's figures move by several percent on a shared host).",
		"Same offered load for both (open loop, paced every 1ms): calls/s match unless one fell behind.",
		"CPU is the whole process, load generator included (identical work for both).",
		"Library CPU: CPU per call less the load alone's (the same load through a null implementation, which",
		"  does no timer work), times the run's calls. Per call, because the load makes more calls against a",
		"  real implementation (it re-issues the background requests that time out) than alone (nothing fires).",
		"  It includes the bodies of the tasks that fire: the same for both.",
		"Heap per timer: live heap with the timers resident, less the heap before the run and the load's",
		"  handle tables; it includes each timer's task closure (identical for both).",
		"Lateness: task start - (clock read before the schedule call + delay), measured in every task of both.",
	}
	if sw != nil {
		notes = append(notes,
			fmt.Sprintf("shardwheel files timers on a %v tick grid, rounding up: by design it runs them up to a tick", sw.Tick),
			"  late, plus its tick lag. Tick lag and Stats lateness (against the deadline's tick, so up to a tick less",
			"  than what tasks see) come from its Stats; go run ./bench tune shows the trade-off of shorter ticks.")
	}
	var busy []string // "the shardwheel (0.73 of 2 CPUs)", one per busy run
	for _, r := range []*Result{sw, c.LoadAlone, af} {
		if r == nil {
			continue
		}
		if l := r.Library; l != nil && l.Noise {
			notes = append(notes, fmt.Sprintf("NOISE: %s's library CPU per call, %s, is below %.0f%% of the load alone's, so it has no ratio: within what two runs",
				r.Impl, units.Duration(time.Duration(l.PerOp)), 100*noiseShare),
				fmt.Sprintf("  of one load differ by on a shared host, or the load's fixed cost (pacing every 1ms) weighing more per call alone (%s calls/s, against %s).",
					units.SI(c.LoadAlone.OpsPerSec), units.SI(r.OpsPerSec)))
		}
		// With both sides measured, the verdict says that a run far
		// behind (offLoad) makes their figures incomparable.
		if off := offLoad(r, c.Load.Duration); !r.KeptUp && (off == "" || sw == nil || af == nil) {
			notes = append(notes, fmt.Sprintf("WARNING: %s issued %.0f%% of the offered %s requests/s (fell up to %v behind); its figures are for the load it managed.",
				r.Impl, 100*r.AchievedRate/r.TargetRate, units.SI(r.TargetRate), units.Duration(r.MaxBacklog)))
		}
		if cores, ok := otherBusy(r.OtherCPU, r.Measured, c.Host.NumCPU); ok {
			busy = append(busy, fmt.Sprintf("%s (%s of %d CPUs)", r.Impl, units.Sig(cores), c.Host.NumCPU))
		}
		if r.Partial {
			notes = append(notes, fmt.Sprintf("INTERRUPTED: %s was measured for %v only.", r.Impl, units.Duration(r.Measured)))
		}
	}
	if len(busy) > 0 {
		runs := "runs"
		if len(busy) == 1 {
			runs = "run"
		}
		notes = append(notes, fmt.Sprintf("WARNING: other processes kept the host busy during the %s %s: expect inflated latencies.",
			listed(busy), runs))
	}
	if c.Interrupted {
		for _, r := range []struct {
			name string
			res  *Result
		}{{nameWheel, sw}, {nameNull, c.LoadAlone}, {nameStdlib, af}} {
			if r.res == nil {
				notes = append(notes, fmt.Sprintf("INTERRUPTED: %s was not measured.", r.name))
			}
		}
	}
	return notes
}

// busyNote warns when other processes kept the host busy (busyCores)
// during r's window, or returns "".
func busyNote(r *Result, numCPU int) string {
	busy, ok := otherBusy(r.OtherCPU, r.Measured, numCPU)
	if !ok {
		return ""
	}
	return fmt.Sprintf("WARNING: other processes kept %s of %d CPUs busy during the %s run: expect inflated latencies.",
		units.Sig(busy), numCPU, r.Impl)
}

// verdict sums up the comparison: the proxy-shaped load's ratios that
// matter, or, when either side did not run that load as asked (offLoad),
// that its figures do not compare and why; then the churn section's; then
// one plain conclusion and what to do next. The proxy-shaped load's
// ratios and winners are left out of a verdict on figures that do not
// compare (the results keep them).
func (c *Comparison) verdict() Verdict {
	v := Verdict{Ratios: map[string]float64{}, Winners: map[string]string{}}
	sw, af := c.find(nameWheel), c.find(nameStdlib)
	var off []string // how the proxy-shaped load's runs strayed from it
	if sw != nil && af != nil {
		for _, r := range []*Result{sw, af} {
			if why := offLoad(r, c.Load.Duration); why != "" {
				off = append(off, why)
			}
		}
	}
	if sw != nil && af != nil && len(off) > 0 {
		v.Summary = append(v.Summary, fmt.Sprintf("proxy-shaped load: NOT COMPARABLE: %s: the host could not run the load as asked, "+
			"so the figures above measure the host as much as the timers.", strings.Join(off, "; ")))
	}
	if sw != nil && af != nil && len(off) == 0 {
		names := []string{nameWheel, nameStdlib}
		for _, m := range reportRows(true) {
			if m.key == "" {
				continue
			}
			if w := rowWinner(m, names, []*Result{sw, af}); w != "" {
				v.Winners["proxy_load/"+m.key] = w
			}
			if q, ok := c.Ratios[m.key]; ok {
				v.Ratios["proxy_load/"+m.key] = q
			}
		}
		v.Summary = append(v.Summary, fmt.Sprintf("proxy-shaped load, shardwheel (%s) against time.AfterFunc: %s.", sw.Call, c.loadVerdict(sw, af)))
	}
	if c.Churn != nil {
		cv := c.Churn.verdict(c.ChurnConfig)
		v.Summary = append(v.Summary, cv.Summary...)
		for k, q := range cv.Ratios {
			v.Ratios["churn/"+k] = q
		}
		for k, w := range cv.Winners {
			v.Winners["churn/"+k] = w
		}
	}
	if len(v.Summary) > 0 {
		v.Summary = append(v.Summary, "conclusion: "+c.conclusion(v, len(off) > 0), "next: "+c.next(sw, af, len(off) > 0))
	}
	return v
}

// conclusion is the verdict's plain conclusion, from its ratios: whether
// shardwheel's CPU and heap were lower than time.AfterFunc's in the loads
// whose figures compare (those of the proxy-shaped load do not when off),
// load by load where the loads disagree.
func (c *Comparison) conclusion(v Verdict, off bool) string {
	type load struct {
		name      string
		cpu, heap []float64
	}
	var proxy, churn load
	proxy.name, churn.name = "the proxy-shaped load", "the churn"
	if q, ok := v.Ratios["proxy_load/library_cpu_per_op"]; ok {
		proxy.cpu = append(proxy.cpu, q)
	} else if q, ok := v.Ratios["proxy_load/cpu_per_op"]; ok {
		proxy.cpu = append(proxy.cpu, q)
	}
	if q, ok := v.Ratios["proxy_load/bytes_per_timer"]; ok {
		proxy.heap = append(proxy.heap, q)
	}
	for _, g := range c.ChurnConfig.Goroutines {
		for _, impl := range churnImpls[1:] {
			if q, ok := v.Ratios[fmt.Sprintf("churn/g%d/%s/cpu_per_pair", g, impl)]; ok {
				churn.cpu = append(churn.cpu, q)
			}
			if q, ok := v.Ratios[fmt.Sprintf("churn/g%d/%s/heap_objects", g, impl)]; ok {
				churn.heap = append(churn.heap, q)
			}
		}
	}
	var loads []load
	for _, l := range []load{proxy, churn} {
		if len(l.cpu)+len(l.heap) > 0 {
			loads = append(loads, l)
		}
	}
	if len(loads) == 0 {
		if off {
			return "none: no load ran as asked, so no figure compares."
		}
		return "none: too little was measured to compare."
	}
	// say words one figure over the loads: at once where they agree,
	// load by load where they do not.
	say := func(what string, of func(load) []float64) string {
		var all []float64
		for _, l := range loads {
			all = append(all, of(l)...)
		}
		if len(all) == 0 {
			return ""
		}
		if t := trend(all); t != "mixed" || len(loads) == 1 {
			return fmt.Sprintf("its %s %s (%s)", what, t, ratioSpan(all))
		}
		var per []string
		for _, l := range loads {
			if qs := of(l); len(qs) > 0 {
				per = append(per, fmt.Sprintf("%s on %s (%s)", trend(qs), l.name, ratioSpan(qs)))
			}
		}
		return fmt.Sprintf("its %s %s", what, listed(per))
	}
	var parts, names []string
	for _, p := range []string{say("CPU", func(l load) []float64 { return l.cpu }), say("heap", func(l load) []float64 { return l.heap })} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	for _, l := range loads {
		names = append(names, l.name)
	}
	s := fmt.Sprintf("on %s, shardwheel's figures against time.AfterFunc's: %s.", listed(names), strings.Join(parts, "; "))
	if l := c.losses(v, off); len(l) > 0 {
		s += " time.AfterFunc did better on " + listed(l) + "."
	}
	if off {
		s += " The proxy-shaped load says nothing either way."
	}
	return s
}

// losses lists every figure of the verdict on which time.AfterFunc did
// better than a shardwheel implementation, with both figures, so that a
// conclusion never reports the wins alone: the proxy-shaped load's rows
// whose winner is the runtime's timers (unless its figures do not
// compare: off), then each churn row on which time.AfterFunc beat one of
// the churn's shardwheel implementations by pickWinner's rule, the two
// compared alone (the row's winner may be the other one), unless the
// row's figures are noise.
func (c *Comparison) losses(v Verdict, off bool) []string {
	var out []string
	sw, af := c.find(nameWheel), c.find(nameStdlib)
	if sw != nil && af != nil && !off {
		for _, m := range reportRows(true) {
			if m.key != "" && v.Winners["proxy_load/"+m.key] == nameStdlib {
				out = append(out, fmt.Sprintf("the proxy-shaped load's %s (%s against %s)", m.label, m.show(sw), m.show(af)))
			}
		}
	}
	if c.Churn == nil {
		return out
	}
	for _, g := range c.ChurnConfig.Goroutines {
		base := c.Churn.summary(g, churnStd)
		if base == nil {
			continue
		}
		for _, m := range churnMetrics() {
			if m.better == "" || m.noise(base) != "" {
				continue
			}
			b := base.Figures[m.key]
			for _, impl := range churnImpls[1:] {
				s := c.Churn.summary(g, impl)
				if s == nil || m.noise(s) != "" {
					continue
				}
				f := s.Figures[m.key]
				if pickWinner(m.better, candidate{churnStd, b.Median, b.Min, b.Max, true},
					candidate{impl, f.Median, f.Min, f.Max, true}) == churnStd {
					out = append(out, fmt.Sprintf("the churn's %s at %s (%s %s against %s)", m.label,
						plural(g, "goroutine"), churnCall(impl), m.show(f.Median), m.show(b.Median)))
				}
			}
		}
	}
	return out
}

// next says what to run next: on figures that do not compare, a quieter
// host or a lighter load (a rate the slower side managed, with a margin);
// on a busy host, a quiet one for figures to publish; else the commands
// that go further.
func (c *Comparison) next(sw, af *Result, off bool) string {
	if off {
		rate := c.Load.Rate / 2 // the window ran long: half the load
		for _, r := range []*Result{sw, af} {
			if r.AchievedRate < minShare*r.TargetRate {
				rate = min(rate, 0.8*r.AchievedRate)
			}
		}
		return fmt.Sprintf("rerun on a quieter host (with nothing else running), or offer less load: go run ./bench -rate %.0f.",
			twoDigits(rate))
	}
	busy := c.churnBusy()
	for _, r := range []*Result{sw, c.LoadAlone, af} {
		if r != nil {
			_, b := otherBusy(r.OtherCPU, r.Measured, c.Host.NumCPU)
			busy = busy || b
		}
	}
	if busy {
		return "for figures to publish, rerun on a quiet host (-churn-wait-quiet waits for one before each churn run); " +
			"go run ./bench tune picks shards and tick for your load."
	}
	return "go run ./bench tune picks shards and tick for your load; go run ./bench churn -rounds 5 narrows the churn's ranges."
}

// churnBusy reports whether other processes kept the host busy during any
// run of the churn section.
func (c *Comparison) churnBusy() bool {
	if c.Churn != nil {
		for _, s := range c.Churn.Summaries {
			if s.Busy > 0 {
				return true
			}
		}
	}
	return false
}

// twoDigits rounds v down to two significant digits: 222,400 is 220,000.
func twoDigits(v float64) float64 {
	if v < 10 {
		return math.Max(math.Floor(v), 1)
	}
	unit := math.Pow(10, math.Floor(math.Log10(v))-1)
	return math.Floor(v/unit) * unit
}

// loadVerdict is the proxy-shaped load's part of the verdict: CPU, heap,
// GC and lateness, each as a ratio, or as two figures where a ratio
// would mislead.
func (c *Comparison) loadVerdict(sw, af *Result) string {
	r := func(key string) string {
		q, ok := c.Ratios[key]
		return fmtRatio(q, ok)
	}
	var parts []string
	if sw.Library != nil && af.Library != nil && !sw.Library.Noise && !af.Library.Noise {
		parts = append(parts, "library CPU per call "+r("library_cpu_per_op"))
	} else {
		parts = append(parts, "CPU per call "+r("cpu_per_op")+" (load included: the library's own share is within noise)")
	}
	parts = append(parts, "heap per timer "+r("bytes_per_timer"))
	if gcNoiseOf(sw.GC) != "" || gcNoiseOf(af.GC) != "" {
		parts = append(parts, fmt.Sprintf("GC cycles %d vs %d (noise)", sw.GC.Cycles, af.GC.Cycles))
	} else {
		parts = append(parts, "GC CPU "+r("gc_cpu"))
	}
	late := "lateness"
	if sw.Lateness.Count > 0 && af.Lateness.Count > 0 {
		q, ok := c.Ratios["lateness_p50"]
		late += " p50 " + lateDiff(sw.Lateness.P50, af.Lateness.P50, sw.Tick, q, ok)
		late += ", p99 " + r("lateness_p99")
		if min(sw.Lateness.Count, af.Lateness.Count) < minSamples {
			late += " (noise: few samples)"
		}
		parts = append(parts, late)
	}
	return strings.Join(parts, ", ")
}
