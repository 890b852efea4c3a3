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
	Points         []TunePoint   `json:"points"`
	// Recommended indexes Points; -1 if no point was measured.
	Recommended int `json:"recommended"`
	// MetTarget reports whether the recommended point meets the targets;
	// if none does, the recommendation is the lowest tick lag.
	MetTarget   bool     `json:"met_target"`
	Options     string   `json:"options,omitempty"`
	Reasoning   []string `json:"reasoning"`
	Interrupted bool     `json:"interrupted"`
}

// TunePoint is one configuration tried, and why it fails the targets
// ("" when it meets them).
type TunePoint struct {
	Shards int           `json:"shards"`
	Tick   time.Duration `json:"tick_ns"`
	Result Result        `json:"result"`
	Fails  string        `json:"fails,omitempty"`
}

// tune runs o's load at every (shards, tick) of o's lists, then picks.
func tune(ctx context.Context, o options, p *progress) (*Tuning, error) {
	t := &Tuning{Command: "tune", Host: host(), Load: o.load, LagTarget: o.lagP99, LatenessTarget: o.lateP99, Recommended: -1}
	n, i := len(o.shardList)*len(o.tickList), 0
sweep:
	for _, shards := range o.shardList {
		for _, tick := range o.tickList {
			if ctx.Err() != nil {
				break sweep
			}
			i++
			pt := TunePoint{Shards: shards, Tick: tick}
			p.note("point %d/%d: %s", i, n, pt.label())
			r, err := runWheel(ctx, runSpec{load: o.load, shards: shards, tick: tick, keyed: o.keyed, progress: p})
			if err != nil {
				return t, err
			}
			if r.Measured > 0 {
				pt.Result, pt.Fails = r, t.fails(&r)
				t.Points = append(t.Points, pt)
			}
			settle()
		}
	}
	t.Interrupted = ctx.Err() != nil
	t.recommend()
	return t, nil
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

// lagP99 is r's tick lag p99, 0 if it has none.
func lagP99(r *Result) time.Duration {
	if r.TickLag == nil {
		return 0
	}
	return r.TickLag.P99
}

// cpuNoise is how far apart two points' CPU per call may be and still
// count as equal: runs of a few seconds differ by a few percent between
// repeats of the same point.
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
	if t.MetTarget {
		slices.SortFunc(ok, byCPU)
		for _, i := range ok {
			if res(i).CPUPerOp <= res(ok[0]).CPUPerOp*(1+cpuNoise) {
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
	t.Reasoning = t.reasons(ok, tied)
}

// reasons explains the pick: why this point, what the next cheapest
// costs, which points failed and why, and what the tick means for
// lateness. ok are the points that meet the targets, cheapest first, and
// tied those that cost the same as the cheapest within cpuNoise.
func (t *Tuning) reasons(ok, tied []int) []string {
	best := &t.Points[t.Recommended]
	r := &best.Result
	target := fmt.Sprintf("tick lag p99 <= %s", units.Duration(t.LagTarget))
	if t.LatenessTarget > 0 {
		target += fmt.Sprintf(" and lateness p99 <= %s", units.Duration(t.LatenessTarget))
	}
	var out []string
	if t.MetTarget {
		out = append(out, fmt.Sprintf("%s meets %s (tick lag p99 %s) with the least CPU of the %d of %d points that do: %s per call, %s cores.",
			best.label(), target, units.Duration(lagP99(r)), len(ok), len(t.Points), units.Duration(time.Duration(r.CPUPerOp)), units.Sig(r.CPU.Seconds()/r.Measured.Seconds())))
		if len(tied) > 1 {
			out = append(out, fmt.Sprintf("%d points cost the same within %.0f%% (run-to-run noise); of those it runs timers least late (lateness p99 %s).",
				len(tied), cpuNoise*100, units.Duration(r.Lateness.P99)))
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
	busy := 0
	for _, pt := range t.Points {
		if pt.Fails != "" {
			out = append(out, fmt.Sprintf("Failed: %s: %s.", pt.label(), pt.Fails))
		}
		if busyNote(&pt.Result, t.Host.NumCPU) != "" {
			busy++
		}
	}
	if busy > 0 {
		out = append(out, fmt.Sprintf("WARNING: other processes kept the host busy during %d of the %d points: their lag is inflated; rerun on a quiet host.", busy, len(t.Points)))
	}
	out = append(out, fmt.Sprintf("Trade-off: a timer runs up to about 2 ticks after its deadline; with a %v tick the measured lateness p99 is %s. Use -lateness-p99 to bound it.",
		best.Tick, units.Duration(r.Lateness.P99)))
	if t.Interrupted {
		out = append(out, "INTERRUPTED: only the points above were measured.")
	}
	return out
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
	fmt.Fprintf(&b, "measured %v per point after %v warm-up\n\n", t.Load.Duration, t.Load.Warmup)
	tb := &table{align: "rrrrrrrrrrl"}
	tb.add("shards", "tick", "req/s", "CPU/call", "cores", "lag p50", "lag p99", "lag max", "lateness p99", "heap/timer", "")
	for i, pt := range t.Points {
		r := &pt.Result
		verdict := "ok"
		if pt.Fails != "" {
			verdict = "fails"
		}
		if i == t.Recommended {
			verdict += " <- recommended"
		}
		var lag50, lagMax time.Duration
		if r.TickLag != nil {
			lag50, lagMax = r.TickLag.P50, r.TickLag.Max
		}
		tb.add(fmt.Sprint(pt.Shards), pt.Tick.String(),
			fmt.Sprintf("%s (%.0f%%)", units.SI(r.AchievedRate), 100*r.AchievedRate/r.TargetRate),
			units.Duration(time.Duration(r.CPUPerOp)), units.Sig(r.CPU.Seconds()/r.Measured.Seconds()),
			units.Duration(lag50), units.Duration(lagP99(r)), units.Duration(lagMax), units.Duration(r.Lateness.P99),
			fmt.Sprintf("%.0f B", r.BytesPerTimer), verdict)
	}
	if err := tb.write(&b); err != nil {
		return err
	}
	b.WriteString("\n")
	if t.Recommended >= 0 {
		fmt.Fprintf(&b, "Recommended:\n\n\ts, err := shardwheel.New(%s)\n\n", t.Options)
	}
	for _, r := range t.Reasoning {
		b.WriteString(r + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
