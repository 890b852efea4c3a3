package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/units"
)

// Tuning is the outcome of tune: the load against shardwheel at every
// point of a grid of shard counts and ticks, and the recommended point.
type Tuning struct {
	Command string `json:"command"`
	Host    Host   `json:"host"`
	Load    Load   `json:"load"`
	// LagTarget is the tick lag p99 a point must meet; LatenessTarget, if
	// not 0, the lateness p99.
	LagTarget      time.Duration `json:"lag_p99_target_ns"`
	LatenessTarget time.Duration `json:"lateness_p99_target_ns,omitempty"`
	// Shards, Ticks and Repeats are the grid asked for.
	Shards  []int           `json:"shards"`
	Ticks   []time.Duration `json:"ticks_ns"`
	Repeats int             `json:"repeats"`
	Points  []TunePoint     `json:"points"`
	// Recommended indexes Points; -1 if no point was measured.
	Recommended int `json:"recommended"`
	// MetTarget reports whether the recommended point meets the targets;
	// if none does, the recommendation is the lowest tick lag.
	MetTarget   bool     `json:"met_target"`
	Options     string   `json:"options,omitempty"`
	Reasoning   []string `json:"reasoning"`
	Interrupted bool     `json:"interrupted"`
}

// TunePoint is one configuration tried: its runs, their medians in Result
// (CPU per call, tick lag p50 and p99, lateness p99, rates, heap; kept up
// only if every run did; its other figures are the first run's), the
// ranges of the figures the table shows them with, and why it fails the
// targets ("" when it meets them).
type TunePoint struct {
	Shards int           `json:"shards"`
	Tick   time.Duration `json:"tick_ns"`
	Result Result        `json:"result"`
	Runs   []Result      `json:"runs,omitempty"`
	// Ranges over the runs: [min, max].
	CPUPerOpRange    [2]float64       `json:"cpu_per_op_range"`
	LagP50Range      [2]time.Duration `json:"lag_p50_range_ns"`
	LagP99Range      [2]time.Duration `json:"lag_p99_range_ns"`
	LatenessP99Range [2]time.Duration `json:"lateness_p99_range_ns"`
	Fails            string           `json:"fails,omitempty"`
}

// tune runs o's load at every (shards, tick) of o's lists, in rounds that
// visit every point once, so that a noisy spell of the host spreads over
// the points instead of spoiling one; then it picks on the medians.
func tune(ctx context.Context, o options, p *progress) (*Tuning, error) {
	t := &Tuning{Command: "tune", Host: host(), Load: o.load, LagTarget: o.lagP99, LatenessTarget: o.lateP99, Recommended: -1,
		Shards: o.shardList, Ticks: o.tickList, Repeats: o.repeats}
	var pts []TunePoint
	for _, shards := range o.shardList {
		for _, tick := range o.tickList {
			pts = append(pts, TunePoint{Shards: shards, Tick: tick})
		}
	}
	pl := newPlan(p, "tune", repeat(expectLoadRun(o.load), o.repeats*len(pts)))
sweep:
	for round := 1; round <= o.repeats; round++ {
		for i := range pts {
			if ctx.Err() != nil {
				break sweep
			}
			pl.start(fmt.Sprintf("round %d of %d, point %d of %d: %s", round, o.repeats, i+1, len(pts), pts[i].label()))
			r, err := runWheel(ctx, runSpec{load: o.load, shards: pts[i].Shards, tick: pts[i].Tick, keyed: o.keyed, progress: p})
			if err != nil {
				return t, err
			}
			if r.Measured > 0 {
				pts[i].Runs = append(pts[i].Runs, r)
			}
			settle()
		}
	}
	for _, pt := range pts {
		if len(pt.Runs) > 0 {
			pt.summarize()
			pt.Fails = t.fails(&pt.Result)
			t.Points = append(t.Points, pt)
		}
	}
	t.Interrupted = ctx.Err() != nil
	t.recommend()
	return t, nil
}

// summarize sets pt's Result to the medians of its runs, and its ranges.
func (pt *TunePoint) summarize() {
	runs := pt.Runs
	mid := func(f func(r *Result) float64) (med, lo, hi float64) {
		v := make([]float64, len(runs))
		for i := range runs {
			v[i] = f(&runs[i])
		}
		return medianRange(v)
	}
	cpu, cpuLo, cpuHi := mid(func(r *Result) float64 { return r.CPUPerOp })
	lag50, lag50Lo, lag50Hi := mid(func(r *Result) float64 { return float64(lagP50(r)) })
	lag, lagLo, lagHi := mid(func(r *Result) float64 { return float64(lagP99(r)) })
	late, lateLo, lateHi := mid(func(r *Result) float64 { return float64(r.Lateness.P99) })
	res := runs[0]
	res.CPUPerOp = cpu
	cores, _, _ := mid(func(r *Result) float64 { return r.CPU.Seconds() / r.Measured.Seconds() })
	res.CPU = time.Duration(cores * float64(res.Measured))
	res.AchievedRate, _, _ = mid(func(r *Result) float64 { return r.AchievedRate })
	res.BytesPerTimer, _, _ = mid(func(r *Result) float64 { return r.BytesPerTimer })
	if res.TickLag != nil {
		p := *res.TickLag
		p.P50, p.P99 = time.Duration(lag50), time.Duration(lag)
		res.TickLag = &p
	}
	res.Lateness.P99 = time.Duration(late)
	for _, r := range runs {
		res.KeptUp = res.KeptUp && r.KeptUp
	}
	pt.Result = res
	pt.CPUPerOpRange = [2]float64{cpuLo, cpuHi}
	pt.LagP50Range = [2]time.Duration{time.Duration(lag50Lo), time.Duration(lag50Hi)}
	pt.LagP99Range = [2]time.Duration{time.Duration(lagLo), time.Duration(lagHi)}
	pt.LatenessP99Range = [2]time.Duration{time.Duration(lateLo), time.Duration(lateHi)}
}

// fails says which target r misses, or "" if it meets them all.
func (t *Tuning) fails(r *Result) string {
	var why []string
	if !r.KeptUp {
		why = append(why, fmt.Sprintf("fell behind the load (%.0f%%)", 100*r.AchievedRate/r.TargetRate))
	}
	if r.TickLag == nil || r.TickLag.P99 > t.LagTarget {
		why = append(why, fmt.Sprintf("tick lag p99 %s > %s", units.Duration(lagP99(r)), units.Duration(t.LagTarget)))
	}
	if t.LatenessTarget > 0 && r.Lateness.P99 > t.LatenessTarget {
		why = append(why, fmt.Sprintf("lateness p99 %s > %s", units.Duration(r.Lateness.P99), units.Duration(t.LatenessTarget)))
	}
	return strings.Join(why, ", ")
}

// lagP50 is r's tick lag p50, 0 if it has none.
func lagP50(r *Result) time.Duration {
	if r.TickLag == nil {
		return 0
	}
	return r.TickLag.P50
}

// lagP99 is r's tick lag p99, 0 if it has none.
func lagP99(r *Result) time.Duration {
	if r.TickLag == nil {
		return 0
	}
	return r.TickLag.P99
}

// cpuNoise is how far apart two points' CPU per call may be and still
// count as equal: runs of a few seconds differ by a few percent between
// repeats of the same point. Where the cheapest point's own runs spread
// wider, that spread is the noise instead.
const cpuNoise = 0.05

// recommend picks, among the points that meet the targets, the one with
// the least CPU per call (the load is the same at every point, so this is
// the least CPU); of those within cpuNoise of it, the one whose timers run
// least late. If no point meets the targets, it picks the lowest tick lag.
func (t *Tuning) recommend() {
	if len(t.Points) == 0 {
		t.Reasoning = []string{"No point was measured."}
		return
	}
	var ok []int
	for i, pt := range t.Points {
		if pt.Fails == "" {
			ok = append(ok, i)
		}
	}
	res := func(i int) *Result { return &t.Points[i].Result }
	byCPU := func(a, b int) int { return cmp.Compare(res(a).CPUPerOp, res(b).CPUPerOp) }
	t.MetTarget = len(ok) > 0
	var tied []int
	noise := cpuNoise
	if t.MetTarget {
		slices.SortFunc(ok, byCPU)
		cheapest := &t.Points[ok[0]]
		if c := cheapest.Result.CPUPerOp; c > 0 {
			noise = max(noise, (cheapest.CPUPerOpRange[1]-cheapest.CPUPerOpRange[0])/c)
		}
		for _, i := range ok {
			if res(i).CPUPerOp <= res(ok[0]).CPUPerOp*(1+noise) {
				tied = append(tied, i)
			}
		}
		t.Recommended = slices.MinFunc(tied, func(a, b int) int {
			return cmp.Or(cmp.Compare(res(a).Lateness.P99, res(b).Lateness.P99), byCPU(a, b))
		})
	} else {
		all := make([]int, len(t.Points))
		for i := range all {
			all[i] = i
		}
		t.Recommended = slices.MinFunc(all, func(a, b int) int {
			return cmp.Or(cmp.Compare(lagP99(res(a)), lagP99(res(b))), byCPU(a, b))
		})
	}
	best := &t.Points[t.Recommended]
	t.Options = fmt.Sprintf("shardwheel.WithShards(%d), shardwheel.WithTick(%s)", best.Shards, goDuration(best.Tick))
	t.Reasoning = t.reasons(ok, tied, noise)
}

// reasons explains the pick: why this point, what the next cheapest
// costs, which points failed and why, and what the tick means for
// lateness. ok are the points that meet the targets, cheapest first, and
// tied those that cost the same as the cheapest within noise.
func (t *Tuning) reasons(ok, tied []int, noise float64) []string {
	best := &t.Points[t.Recommended]
	r := &best.Result
	target := fmt.Sprintf("tick lag p99 <= %s", units.Duration(t.LagTarget))
	if t.LatenessTarget > 0 {
		target += fmt.Sprintf(" and lateness p99 <= %s", units.Duration(t.LatenessTarget))
	}
	var out []string
	if t.MetTarget {
		out = append(out, fmt.Sprintf("%s meets %s (tick lag p99 %s) with the least CPU of the points that do (%d of %d): %s per call, %s cores.",
			best.label(), target, units.Duration(lagP99(r)), len(ok), len(t.Points), units.Duration(time.Duration(r.CPUPerOp)), units.Sig(r.CPU.Seconds()/r.Measured.Seconds())))
		if len(tied) > 1 {
			out = append(out, fmt.Sprintf("%d points cost the same within %.0f%% (run-to-run noise); of those it runs timers least late (lateness p99 %s).",
				len(tied), noise*100, units.Duration(r.Lateness.P99)))
		}
		for _, i := range ok {
			if i != t.Recommended && !slices.Contains(tied, i) {
				next := &t.Points[i]
				out = append(out, fmt.Sprintf("Next cheapest: %s at %+.0f%% CPU per call.", next.label(), 100*(next.Result.CPUPerOp/r.CPUPerOp-1)))
				break
			}
		}
	} else {
		out = append(out, fmt.Sprintf("No point meets %s; %s has the lowest tick lag (p99 %s). Loosen -lag-p99, lighten the load or use a quieter host.",
			target, best.label(), units.Duration(lagP99(r))))
	}
	for _, pt := range t.Points {
		if pt.Fails != "" {
			out = append(out, fmt.Sprintf("Failed: %s: %s.", pt.label(), pt.Fails))
		}
	}
	if n := t.busyNote(); n != "" {
		out = append(out, n)
	}
	out = append(out, t.tradeOff(best.Shards))
	if t.Interrupted {
		out = append(out, "INTERRUPTED: only the points above were measured.")
	}
	return out
}

// busyNote warns when other processes kept the host busy (busyCores)
// during any run of any point: it counts every such run, and the points
// they belong to, or returns "".
func (t *Tuning) busyNote() string {
	busyRuns, runs, busyPoints := 0, 0, 0
	for _, pt := range t.Points {
		rs := pt.Runs
		if len(rs) == 0 {
			rs = []Result{pt.Result} // a point built without its runs
		}
		n := 0
		for i := range rs {
			if _, busy := otherBusy(rs[i].OtherCPU, rs[i].Measured, t.Host.NumCPU); busy {
				n++
			}
		}
		runs += len(rs)
		busyRuns += n
		if n > 0 {
			busyPoints++
		}
	}
	if busyRuns == 0 {
		return ""
	}
	return fmt.Sprintf("WARNING: other processes kept the host busy during %d of %s, at %d of %s: their lag is inflated; rerun on a quiet host.",
		busyRuns, plural(runs, "run"), busyPoints, plural(len(t.Points), "point"))
}

// tradeOff says what the tick buys at a shard count: a timer runs up to a
// tick plus the tick lag after its deadline, and a shorter tick wakes busy
// shards more often.
func (t *Tuning) tradeOff(shards int) string {
	var parts []string
	for _, pt := range t.Points {
		if pt.Shards == shards {
			parts = append(parts, fmt.Sprintf("tick %v: lateness p99 %s, CPU per call %s",
				pt.Tick, units.Duration(pt.Result.Lateness.P99), units.Duration(time.Duration(pt.Result.CPUPerOp))))
		}
	}
	return fmt.Sprintf("Trade-off at %s (timers run up to a tick plus the tick lag after their deadline; "+
		"shorter ticks cost CPU only while shards are busy): %s. Use -lateness-p99 to require a bound.",
		plural(shards, "shard"), strings.Join(parts, "; "))
}

// pick names the recommended point in the table and the verdict:
// "recommended" when it meets the targets, else "closest": the point with
// the lowest tick lag, which fails them as every other does.
func (t *Tuning) pick() string {
	if t.MetTarget {
		return "recommended"
	}
	return "closest"
}

// label names the point in prose.
func (pt *TunePoint) label() string {
	if pt.Shards == 1 {
		return fmt.Sprintf("1 shard, tick %v", pt.Tick)
	}
	return fmt.Sprintf("%d shards, tick %v", pt.Shards, pt.Tick)
}

// goDuration writes d as Go source: 5 * time.Millisecond.
func goDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "Hour"}, {time.Minute, "Minute"}, {time.Second, "Second"}, {time.Millisecond, "Millisecond"}, {time.Microsecond, "Microsecond"}} {
		if d%u.d == 0 {
			if d == u.d {
				return "time." + u.name
			}
			return fmt.Sprintf("%d * time.%s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d", d)
}

// writeText writes the table of points, the recommendation as code to
// paste, and the reasoning.
func (t *Tuning) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "shardwheel tuning on %s\n", t.Host)
	t.Load.describe(&b)
	runs := 0
	for _, pt := range t.Points {
		runs = max(runs, len(pt.Runs))
	}
	how := "medians (min-max)"
	if runs == 1 {
		how = "one run each"
	}
	fmt.Fprintf(&b, "measured %v per run after %v warm-up, %s per point: %s\n\n", t.Load.Duration, t.Load.Warmup, plural(runs, "run"), how)
	tb := &table{align: "rrrrrrrrrl"}
	tb.add("shards", "tick", "req/s", "CPU/call", "cores", "lag p50", "lag p99", "lateness p99", "heap/timer", "")
	for i, pt := range t.Points {
		r := &pt.Result
		verdict := "ok"
		if pt.Fails != "" {
			verdict = "fails"
		}
		if i == t.Recommended {
			verdict += " <- " + t.pick()
		}
		span := func(v string, lo, hi time.Duration) string {
			if lo == hi {
				return v // one run, or runs that agree: no range to show
			}
			return fmt.Sprintf("%s (%s-%s)", v, units.Duration(lo), units.Duration(hi))
		}
		tb.add(fmt.Sprint(pt.Shards), pt.Tick.String(),
			fmt.Sprintf("%s (%.0f%%)", units.SI(r.AchievedRate), 100*r.AchievedRate/r.TargetRate),
			span(units.Duration(time.Duration(r.CPUPerOp)), time.Duration(pt.CPUPerOpRange[0]), time.Duration(pt.CPUPerOpRange[1])),
			units.Sig(r.CPU.Seconds()/r.Measured.Seconds()),
			span(units.Duration(lagP50(r)), pt.LagP50Range[0], pt.LagP50Range[1]),
			span(units.Duration(lagP99(r)), pt.LagP99Range[0], pt.LagP99Range[1]),
			span(units.Duration(r.Lateness.P99), pt.LatenessP99Range[0], pt.LatenessP99Range[1]),
			fmt.Sprintf("%.0f B", r.BytesPerTimer), verdict)
	}
	if err := tb.write(&b); err != nil {
		return err
	}
	b.WriteString("\n")
	switch {
	case t.Recommended >= 0 && t.MetTarget:
		fmt.Fprintf(&b, "Recommended:\n\n\ts, err := shardwheel.New(%s)\n\n", t.Options)
	case t.Recommended >= 0:
		fmt.Fprintf(&b, "No point meets the targets. The closest (the lowest tick lag p99), to try again on a quieter host or a lighter load:\n\n\ts, err := shardwheel.New(%s)\n\n", t.Options)
	}
	for _, r := range t.Reasoning {
		b.WriteString(r + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
