package profiling

import (
	"bytes"
	_ "embed" // for the report template
	"fmt"
	"html/template"
	"math"
	"runtime"
	"strconv"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/units"
)

//go:embed report.html.tmpl
var reportHTML string

// reportTemplate renders report.html. The page is self-contained: its
// style is inline and its plots are SVG drawn by chart.svg, so it can be
// mailed or attached to a ticket and opened offline.
var reportTemplate = template.Must(template.New(htmlFile).Parse(reportHTML))

// htmlPage is the data of reportTemplate.
type htmlPage struct {
	Title    string
	Subtitle string
	Cards    []card
	Findings []finding
	Charts   []htmlChart
	Latency  []latencyRow
	Config   [][2]string
	Summary  string
}

// card is a headline figure; Warn marks one beyond a tick.
type card struct {
	Label, Value, Detail string
	Warn                 bool
}

// htmlChart is one plot with a caption saying how to read it.
type htmlChart struct {
	SVG     template.HTML
	Caption string
}

// latencyRow is a row of the latency table.
type latencyRow struct {
	Name                                  string
	Count                                 uint64
	P50, P90, P99, P999, Max, Mean, Worst string
}

// html renders report.html from the capture's summary sm and its text.
func (r *recording) html(sm *summary, text string) ([]byte, error) {
	t := sm.total
	limit := lateLimit(r.tick)
	sec := r.elapsed.Seconds()
	rate := "0/s"
	if sec > 0 {
		rate = units.Rate(float64(t.Fired) / sec)
	}
	p := htmlPage{
		Title: "shardwheel latency report",
		Subtitle: fmt.Sprintf("%d shards · tick %s · %s captured from %s · %d samples every %s",
			r.shards, units.Duration(r.tick), units.Duration(r.elapsed), r.start.Format("2006-01-02 15:04:05 MST"),
			len(r.samples), units.Duration(r.cfg.Interval)),
		Cards: []card{
			{"lateness p99", units.Duration(t.Lateness.P99), "max " + units.Duration(t.Lateness.Max) +
				" (from the deadline's tick; tasks see up to a tick more)", t.Lateness.P99 > limit},
			{"tick lag p99", units.Duration(t.TickLag.P99), "max " + units.Duration(t.TickLag.Max), t.TickLag.P99 > limit},
			{"task time p99", units.Duration(t.TaskTime.P99), "max " + units.Duration(t.TaskTime.Max), t.TaskTime.Max > r.tick},
			{"fired", rate, strconv.FormatUint(t.Fired, 10) + " timers", false},
			{"pending at end", strconv.Itoa(r.last.Pending), "ring depth " + strconv.Itoa(t.Queued), false},
		},
		Findings: sm.findings(),
		Latency: []latencyRow{
			latencyOf("tick lag", t.TickLag, sm.shards, func(v view) dist { return v.TickLag }),
			latencyOf("lateness", t.Lateness, sm.shards, func(v view) dist { return v.Lateness }),
			latencyOf("task time", t.TaskTime, sm.shards, func(v view) dist { return v.TaskTime }),
			latencyOf("pass time", t.PassTime, sm.shards, func(v view) dist { return v.PassTime }),
		},
		Config: [][2]string{
			{"shards", strconv.Itoa(r.shards)},
			{"tick", units.Duration(r.tick)},
			{"duration", fmt.Sprintf("%s requested, %s captured", units.Duration(r.cfg.Duration), units.Duration(r.elapsed))},
			{"interval", units.Duration(r.cfg.Interval)},
			{"samples", strconv.Itoa(len(r.samples))},
			{"start", r.start.Format(time.RFC3339)},
			{"runtime", fmt.Sprintf("%s, GOMAXPROCS %d, %d CPUs", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU())},
			{"profile", profileFile + ": go tool pprof -http=: " + profileFile},
		},
		Summary: text,
	}
	if r.interrupted {
		p.Subtitle += " · interrupted"
	}

	limitRef := []ref{{limitLabel(r.tick), float64(limit)}}
	tickRef := []ref{{"1 tick (" + units.Duration(r.tick) + ")", float64(r.tick)}}
	xMax := max(r.elapsed.Seconds(), r.cfg.Interval.Seconds())
	overTime := func(title, ylabel string, k yKind, lines []line, refs []ref) chart {
		return chart{
			title: title, xLabel: "time since the capture started", xMax: xMax, xTicks: secondsTicks(xMax),
			yLabel: ylabel, yKind: k, lines: lines, refs: refs,
			fmtX: func(x float64) string { return units.Sig(x) + "s" },
		}
	}
	pick := func(f func(sample) float64) []point {
		pts := make([]point, len(r.samples))
		for i, s := range r.samples {
			pts[i] = point{s.At.Seconds(), f(s)}
		}
		return pts
	}
	// Per interval, the median and the worst: an interval often holds too
	// few samples for p99 and p99.9 to differ from the maximum (the
	// distribution chart has them over the whole capture).
	medianAndMax := func(d func(sample) dist) []line {
		return []line{
			{"p50", "#0072b2", "", pick(func(s sample) float64 { return float64(d(s).P50) })},
			{"max", "#d55e00", "", pick(func(s sample) float64 { return float64(d(s).Max) })},
		}
	}
	throughput := []line{
		{"fired/s", "#009e73", "", pick(func(s sample) float64 { return s.FiredPerSec })},
		{"scheduled/s", "#0072b2", "", pick(func(s sample) float64 { return s.ScheduledPerSec })},
	}
	if t.Cancelled > 0 {
		throughput = append(throughput,
			line{"cancelled/s", "#cc79a7", "", pick(func(s sample) float64 { return s.CancelledPerSec })})
	}

	charts := []struct {
		c       chart
		caption string
	}{
		{overTime("Timer lateness", "lateness", yDuration,
			medianAndMax(func(s sample) dist { return s.Lateness }), limitRef),
			"How late tasks started after the start of their deadline's tick (their requested deadline rounded up to the tick grid), " +
				"median and worst per interval. Go's timers wake a sleeping shard up to about 1ms late (golang/go#44343); " +
				"above the dotted line a shard fell behind."},
		{overTime("Pass time", "pass time", yDuration,
			medianAndMax(func(s sample) dist { return s.PassTime }), tickRef),
			"How long the shards' passes took, median and longest per interval: a pass taking in new timers, moving timers " +
				"down the wheel and running due tasks. A pass longer than a tick is a stall; the summary's slowest pass says what it did."},
		{r.distribution(&t), "The whole capture's lateness and tick lag (how late shards started the ticks they planned to wake for) " +
			"by percentile, on a log scale that spreads out the tail: read a curve's height at 99% for p99."},
		{overTime("Throughput", "timers", yRate, throughput, nil),
			"Timers fired, scheduled and cancelled per second, per interval."},
		{overTime("Task time", "task time", yDuration,
			medianAndMax(func(s sample) dist { return s.TaskTime }), tickRef),
			"Run time of tasks (one in 16 is timed). A task longer than a tick delays every later timer of its shard."},
		{overTime("Pending timers", "timers", yCount, []line{
			{"pending", "#0072b2", "", pick(func(s sample) float64 { return float64(s.Pending) })},
		}, nil), "Timers pending at the end of each interval."},
		{overTime("Queued new timers", "timers", yCount, []line{
			{"in queues", "#e69f00", "", pick(func(s sample) float64 { return float64(s.Queued) })},
		}, nil), "New timers still waiting in the queues for their shard at the end of each interval: " +
			"normally near zero; a rising line means shards cannot keep up with Schedule."},
	}
	for _, c := range charts {
		p.Charts = append(p.Charts, htmlChart{template.HTML(c.c.svg()), c.caption})
	}

	var b bytes.Buffer
	if err := reportTemplate.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("profiling: render %s: %w", htmlFile, err)
	}
	return b.Bytes(), nil
}

// limitLabel names the lateLimit reference line of the plots.
func limitLabel(tick time.Duration) string {
	return fmt.Sprintf("tick + %s slack (%s)", units.Duration(timerSlack), units.Duration(lateLimit(tick)))
}

// latencyOf returns the latency table's row for d, the total of one
// distribution, naming the shard with the highest p99.
func latencyOf(name string, d dist, shards []view, of func(view) dist) latencyRow {
	row := latencyRow{
		Name: name, Count: d.Count,
		P50: units.Duration(d.P50), P90: units.Duration(d.P90), P99: units.Duration(d.P99), P999: units.Duration(d.P999),
		Max: units.Duration(d.Max), Mean: units.Duration(d.Mean), Worst: "-",
	}
	worst := -1
	for i, v := range shards {
		if of(v).Count > 0 && (worst < 0 || of(v).P99 > of(shards[worst]).P99) {
			worst = i
		}
	}
	if worst >= 0 {
		row.Worst = fmt.Sprintf("shard %d (p99 %s)", worst, units.Duration(of(shards[worst]).P99))
	}
	return row
}

// Percentile curve: x is the number of nines of the quantile q,
// -log10(1-q), from 0 (the minimum) to maxNines (p99.99).
const (
	maxNines  = 4
	ninesStep = 0.05
)

// distribution plots the lateness and tick lag of total, the capture's
// total, by percentile.
func (r *recording) distribution(total *view) chart {
	curve := func(s shardwheel.Histogram) []point {
		if s.Count() == 0 {
			return nil
		}
		var pts []point
		for x := 0.0; x <= maxNines+1e-9; x += ninesStep {
			// 1-10^0 = 0 would return the minimum since the histogram
			// started; a tiny q returns the window's first value.
			q := max(1-math.Pow(10, -x), 1e-12)
			pts = append(pts, point{x, float64(s.Quantile(q))})
		}
		return pts
	}
	var ticks []tickMark
	for i, l := range []string{"0%", "90%", "99%", "99.9%", "99.99%"} {
		ticks = append(ticks, tickMark{float64(i), l})
	}
	return chart{
		title:  "Latency distribution over the capture",
		xLabel: "percentile (log scale)",
		xMax:   maxNines,
		xTicks: ticks,
		yLabel: "latency",
		yKind:  yDuration,
		lines: []line{
			{"lateness", "#d55e00", "", curve(total.ShardStats.Lateness)},
			{"tick lag", "#0072b2", "5 4", curve(total.ShardStats.TickLag)},
		},
		refs: []ref{{limitLabel(r.tick), float64(lateLimit(r.tick))}},
		fmtX: func(x float64) string { return "p" + strconv.FormatFloat(100*(1-math.Pow(10, -x)), 'g', 6, 64) },
	}
}
