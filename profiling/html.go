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

	"github.com/shardwheel/shardwheel/internal/hostcpu"
	"github.com/shardwheel/shardwheel/internal/units"
	"github.com/shardwheel/shardwheel/shard"
	"github.com/shardwheel/shardwheel/stats"
)

//go:embed report.html.tmpl
var reportHTML string

// reportTemplate renders report.html and the Handler's HTML page. The
// page is self-contained: its style is inline and its plots are SVG drawn
// by chart.svg, so a report can be mailed or attached to a ticket and
// opened offline.
var reportTemplate = template.Must(template.New(htmlFile).Parse(reportHTML))

// htmlPage is the data of reportTemplate.
type htmlPage struct {
	Title    string
	Subtitle string
	Refresh  int // seconds between reloads; 0: none
	Nav      []navRow
	Cards    []card
	Findings []finding
	// SpikesTitle heads Spikes, the spike lines.
	SpikesTitle  string
	Spikes       []string
	Charts       []htmlChart
	LatencyTitle string
	Latency      []latencyRow
	Config       [][2]string
	Summary      string
}

// navRow is a row of links.
type navRow struct {
	Label string
	Links []navLink
}

// navLink is one link; Current marks the page's own.
type navLink struct {
	Href, Text, Title string
	Current           bool
}

// card is a headline figure; Warn marks one a spike would be made of.
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

// Series colors (Okabe-Ito, distinguishable with color blindness).
const (
	colorP50       = "#0072b2"
	colorP99       = "#e69f00"
	colorMax       = "#d55e00"
	colorFired     = "#009e73"
	colorScheduled = "#0072b2"
	colorCancelled = "#cc79a7"
)

// timeAxis is the x axis of the charts over time: where a sample goes,
// and the axis's range, ticks and label.
type timeAxis struct {
	xMin, xMax float64
	ticks      []tickMark
	label      string
	x          func(*sample) float64 // a sample's point: its end
	from       func(*sample) float64 // where its interval starts
}

// cards returns the headline figures of the window t.
func cards(t *view, tick time.Duration, rate string, pending int) []card {
	limit := lateLimit(tick)
	return []card{
		{"lateness p99", units.Duration(t.Lateness.P99), "p99.9 " + units.Duration(t.Lateness.P999) + ", max " +
			units.Duration(t.Lateness.Max) + " (from the deadline's tick; tasks see up to a tick more)",
			t.Lateness.P99 > limit || t.Lateness.Max > incidentLimit(tick)},
		{"tick lag p99", units.Duration(t.TickLag.P99), "p99.9 " + units.Duration(t.TickLag.P999) + ", max " +
			units.Duration(t.TickLag.Max), t.TickLag.P99 > limit || t.TickLag.Max > incidentLimit(tick)},
		{"task time, max", units.Duration(t.TaskTime.Max), "every task timed; p99 " +
			units.Duration(t.TaskTime.P99) + ": a task delays those queued behind it", t.TaskTime.Max > tick},
		blockedCard(t),
		{"fired", rate, strconv.FormatUint(t.Fired, 10) + " timers", false},
		{"pending", strconv.Itoa(pending), "queued " + strconv.Itoa(t.Queued), false},
	}
}

// blockedCard shows the tasks of the window t that held up the tasks
// behind them past WithBlockedAfter (which went on on another runner).
func blockedCard(t *view) card {
	sub := "tasks that held up others past WithBlockedAfter; the others went on"
	if len(t.Blocked) > 0 {
		sub = strconv.Itoa(len(t.Blocked)) + " still running, the longest " + describeBlocked(t.Blocked[0]) +
			"; its key's later timers wait for it"
	} else if l := t.LongestBlocked; t.BlockedRuns > 0 && l.Running > 0 {
		sub = "the longest since the start " + describeBlocked(l)
	}
	return card{"blocked tasks", strconv.FormatUint(t.BlockedRuns, 10), sub, t.BlockedRuns > 0 || len(t.Blocked) > 0}
}

// timeCharts returns the charts of samples over time: tick lag, lateness
// and pass time (spikes shaded), throughput, tasks per pass, pending and
// queued timers. extra goes after the first three. A line leaves a gap
// where an interval has no value (no timer ran, no tick was late) and
// where the intervals are not contiguous, rather than draw across.
func timeCharts(ax timeAxis, tick time.Duration, samples []sample, spikes []spike, when func(*sample) string, extra ...htmlChart) []htmlChart {
	limitRefs := []ref{
		{limitLabel(tick), float64(lateLimit(tick)), ""},
		{"incident (" + units.Duration(incidentLimit(tick)) + ")", float64(incidentLimit(tick)), "8 4"},
	}
	tickRef := []ref{{"1 tick (" + units.Duration(tick) + ")", float64(tick), ""}}
	var bands []band
	for i := range spikes[:min(len(spikes), maxSpikes)] {
		s := spikes[i].sample
		bands = append(bands, band{ax.from(s), ax.x(s), "spike " + spikes[i].text(when)})
	}
	overTime := func(title, ylabel string, k yKind, noun string, lines []line, refs []ref, shade bool) chart {
		c := chart{
			title: title, xLabel: ax.label, xMin: ax.xMin, xMax: ax.xMax, xTicks: ax.ticks,
			yLabel: ylabel, yKind: k, yNoun: noun, lines: lines, refs: refs,
			fmtX: func(x float64) string { return units.Sig(x) + "s" },
		}
		if shade {
			c.bands = bands
		}
		return c
	}
	// pick returns a line's points: f of each sample that has a value
	// (has), a gap (NaN) for one that has none and before one that does
	// not start where the one before it ended.
	pick := func(f func(*sample) float64, has func(*sample) bool) []point {
		var pts []point
		for i := range samples {
			s := &samples[i]
			if i > 0 && ax.from(s)-ax.x(&samples[i-1]) > gapTolerance*s.Span.Seconds() {
				pts = append(pts, point{math.NaN(), math.NaN()})
			}
			y := math.NaN()
			if has(s) {
				y = f(s)
			}
			pts = append(pts, point{ax.x(s), y})
		}
		return pts
	}
	always := func(*sample) bool { return true }
	percentiles := func(d func(*sample) dist, p50 bool) []line {
		has := func(s *sample) bool { return d(s).Count > 0 }
		var lines []line
		if p50 {
			lines = append(lines, line{"p50", colorP50, "", pick(func(s *sample) float64 { return float64(d(s).P50) }, has)})
		}
		return append(lines,
			line{"p99", colorP99, "", pick(func(s *sample) float64 { return float64(d(s).P99) }, has)},
			line{"max", colorMax, "", pick(func(s *sample) float64 { return float64(d(s).Max) }, has)})
	}
	throughput := []line{
		{"fired/s", colorFired, "", pick(func(s *sample) float64 { return s.FiredPerSec }, always)},
		{"scheduled/s", colorScheduled, "", pick(func(s *sample) float64 { return s.ScheduledPerSec }, always)},
	}
	for i := range samples {
		if samples[i].CancelledPerSec > 0 {
			throughput = append(throughput,
				line{"cancelled/s", colorCancelled, "", pick(func(s *sample) float64 { return s.CancelledPerSec }, always)})
			break
		}
	}
	shaded := ""
	if len(spikes) > 0 {
		shaded = " Shaded: the spikes that lost the most time (hover for what the figures show)."
	}
	gaps := " A line breaks where an interval has no value or the intervals are not contiguous."
	out := []htmlChart{
		{template.HTML(overTime("Tick lag", "tick lag", yDuration, "", percentiles(func(s *sample) dist { return s.TickLag }, true),
			limitRefs, true).svg()),
			"How late the shards started the ticks they planned to wake for, per interval: median, p99 and worst. " +
				"Go's timers wake a sleeping shard up to about 1ms late (golang/go#44343); above the dotted line a shard was " +
				"held up: by its own passes (see pass time) or waiting for a CPU. An interval is a spike when its p99 is over " +
				"the dotted line or its worst over the dashed one." + shaded + gaps},
		{template.HTML(overTime("Timer lateness", "lateness", yDuration, "", percentiles(func(s *sample) dist { return s.Lateness }, true),
			limitRefs, true).svg()),
			"How late tasks started after the start of their deadline's tick (their requested deadline rounded up to the tick grid), " +
				"per interval: median, p99 and worst; above the dotted line a shard fell behind." + shaded + gaps},
		{template.HTML(overTime("Pass time", "pass time", yDuration, "", percentiles(func(s *sample) dist { return s.PassTime }, true),
			tickRef, true).svg()),
			"How long the shards' passes took, per interval: a pass takes in new timers, moves timers down the wheel and hands " +
				"due tasks to the shard's runner, never running one. Lag with short passes means the shards waited for a CPU; " +
				"passes as long as the lag mean they were busy." + shaded + gaps},
	}
	out = append(out, extra...)
	return append(out,
		htmlChart{template.HTML(overTime("Task time", "task time", yDuration, "",
			percentiles(func(s *sample) dist { return s.TaskTime }, false), tickRef, true).svg()),
			"How long tasks ran, every task timed: p99 and longest per interval. A task delays the tasks queued behind it on " +
				"its shard's runner until WithBlockedAfter, and its key's later timers until it returns: keep tasks short." +
				shaded + gaps},
		htmlChart{template.HTML(overTime("Throughput", "throughput", yRate, "timers", throughput, nil, false).svg()),
			"Timers fired, scheduled and cancelled per second, per interval." + gaps},
		htmlChart{template.HTML(overTime("Pending timers", "pending", yCount, "timers", []line{
			{"pending", colorP50, "", pick(func(s *sample) float64 { return float64(s.Pending) }, always)},
		}, nil, false).svg()), "Timers pending at the end of each interval." + gaps},
		htmlChart{template.HTML(overTime("Queued new timers", "queued", yCount, "timers", []line{
			{"in queues", colorP99, "", pick(func(s *sample) float64 { return float64(s.Queued) }, always)},
		}, nil, false).svg()), "New timers still waiting in the queues for their shard at the end of each interval: " +
			"normally near zero; a rising line means shards cannot keep up with new timers." + gaps},
	)
}

// gapTolerance is how much of an interval's length may lie between its
// start and the end of the interval before it without a gap in the
// charts: the snapshots that bound them are taken a little apart.
const gapTolerance = 0.1

// html renders report.html from the capture's summary sm and its text.
func (r *recording) html(sm *summary, text string) ([]byte, error) {
	t := sm.total
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
		Cards:        cards(&t, r.tick, rate, r.last.st.Pending),
		Findings:     sm.findings(),
		LatencyTitle: "Latency over the capture",
		Latency: []latencyRow{
			latencyOf("tick lag", t.TickLag, sm.shards, func(v view) dist { return v.TickLag }),
			latencyOf("lateness", t.Lateness, sm.shards, func(v view) dist { return v.Lateness }),
			latencyOf("pass time", t.PassTime, sm.shards, func(v view) dist { return v.PassTime }),
			latencyOf("task time", t.TaskTime, sm.shards, func(v view) dist { return v.TaskTime }),
		},
		Config: [][2]string{
			{"shards", strconv.Itoa(r.shards)},
			{"tick", units.Duration(r.tick)},
			{"duration", fmt.Sprintf("%s requested, %s captured", units.Duration(r.cfg.Duration), units.Duration(r.elapsed))},
			{"interval", units.Duration(r.cfg.Interval)},
			{"samples", strconv.Itoa(len(r.samples))},
			{"start", r.start.Format(time.RFC3339)},
			{"runtime", fmt.Sprintf("%s, GOMAXPROCS %d, %d CPUs", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU())},
			{"host", hostLine(sm.host)},
			{"profile", profileFile + ": go tool pprof -http=: " + profileFile},
		},
		Summary: text,
	}
	if r.trace != "" {
		p.Config = append(p.Config, [2]string{"trace", traceFile + ": go tool trace " + traceFile +
			" (regions of type " + shard.RegionPass + " are the passes)"})
	}
	if len(sm.spikes) > 0 {
		p.SpikesTitle = fmt.Sprintf("Spikes: intervals with %s, most time lost first", spikeRule(r.tick))
		p.Spikes = sm.spikeLines()
	}
	if r.interrupted {
		p.Subtitle += " · interrupted"
	}
	xMax := max(r.elapsed.Seconds(), r.cfg.Interval.Seconds())
	ax := timeAxis{
		xMax: xMax, ticks: secondsTicks(xMax), label: "time since the capture started (s)",
		x:    func(s *sample) float64 { return s.At.Seconds() },
		from: func(s *sample) float64 { return (s.At - s.Span).Seconds() },
	}
	distChart := htmlChart{template.HTML(distribution("Latency distribution over the capture", r.tick, []curve{
		{"lateness", colorMax, "", t.Shard.Lateness},
		{"tick lag", colorP50, "5 4", t.Shard.TickLag},
	}).svg()), "The whole capture's lateness and tick lag (how late shards started the ticks they planned to wake for) " +
		"by percentile, on a log scale that spreads out the tail: read a curve's height at 99% for p99."}
	p.Charts = timeCharts(ax, r.tick, r.samples, sm.spikes, sm.when, distChart)

	var b bytes.Buffer
	if err := reportTemplate.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("profiling: render %s: %w", htmlFile, err)
	}
	return b.Bytes(), nil
}

// hostLine describes what other processes did to the host over a window.
func hostLine(h procDelta) string {
	if !h.HostKnown {
		return "not known on this OS"
	}
	line := fmt.Sprintf("other processes kept %s of %d CPUs busy on average; this process's threads waited %s in all for a CPU",
		units.Sig(h.OtherCores), runtime.NumCPU(), units.Duration(h.ThreadWait))
	if h.OtherCores >= hostcpu.BusyCores(runtime.NumCPU()) {
		line += ": a busy host"
	}
	return line
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

// curve is one histogram of a distribution chart.
type curve struct {
	name, color, dash string
	h                 stats.Histogram
}

// distribution plots histograms by percentile, with the lateLimit line.
func distribution(title string, tick time.Duration, curves []curve) chart {
	points := func(s stats.Histogram) []point {
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
	c := chart{
		title:  title,
		xLabel: "percentile (log scale, %)",
		xMax:   maxNines,
		xTicks: ticks,
		yLabel: "latency",
		yKind:  yDuration,
		refs:   []ref{{limitLabel(tick), float64(lateLimit(tick)), ""}},
		fmtX:   func(x float64) string { return "p" + strconv.FormatFloat(100*(1-math.Pow(10, -x)), 'g', 6, 64) },
	}
	for _, cv := range curves {
		c.lines = append(c.lines, line{cv.name, cv.color, cv.dash, points(cv.h)})
	}
	return c
}
