package profiling

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"
	"github.com/shardwheel/shardwheel/internal/units"
	"github.com/shardwheel/shardwheel/stats"
)

// dist summarizes one latency distribution, as stats.Histogram's JSON
// form does: durations are integer nanoseconds, hence the _ns suffixes.
type dist = hist.Percentiles

// summarize returns the distribution of the values recorded between the
// snapshots prev and cur of one histogram (Histogram.Sub).
func summarize(cur, prev stats.Histogram) dist {
	d := cur.Sub(prev)
	return dist{
		P50: d.Quantile(0.5), P90: d.Quantile(0.9), P99: d.Quantile(0.99), P999: d.Quantile(0.999),
		Max: d.Max(), Mean: d.Mean(), Count: d.Count(),
	}
}

// view is a stats.Shard over a window: counters are differences between the
// window's end and start, gauges (Resident, Queued, TransferLast) are
// read at its end, and peaks (QueuedPeak, TransferPeak, RefiledPeak,
// SlowestPass) stay the peaks since the scheduler started, since they
// cannot be differenced. The embedded
// histograms hold the window's values (Histogram.Sub); the dist fields
// summarize them and, being shallower, replace them in JSON.
type view struct {
	stats.Shard
	TickLag  dist `json:"tick_lag"`
	Lateness dist `json:"lateness"`
	TaskTime dist `json:"task_time"`
	PassTime dist `json:"pass_time"`
}

// newView returns the window from prev to cur. A zero prev makes the window
// the scheduler's whole life.
func newView(cur, prev stats.Shard) view {
	v := view{Shard: cur.Sub(prev)}
	v.TickLag = summarize(cur.TickLag, prev.TickLag)
	v.Lateness = summarize(cur.Lateness, prev.Lateness)
	v.TaskTime = summarize(cur.TaskTime, prev.TaskTime)
	v.PassTime = summarize(cur.PassTime, prev.PassTime)
	return v
}

// views returns the window from prev to cur for the total and each shard.
// A zero prev (no shards) makes it the scheduler's whole life.
func views(cur, prev stats.Stats) (total view, shards []view) {
	shards = make([]view, len(cur.Shards))
	for i, sh := range cur.Shards {
		var p stats.Shard
		if i < len(prev.Shards) {
			p = prev.Shards[i]
		}
		shards[i] = newView(sh, p)
	}
	return newView(cur.Total, prev.Total), shards
}

// summary is the text report shared by the Handler's page and Capture's
// report.txt.
type summary struct {
	header  []string      // lines printed first
	tick    time.Duration // the scheduler's tick
	pending int           // Scheduler.Pending at the window's end
	elapsed time.Duration // the window's length, 0 if unknown (no rates)
	total   view
	shards  []view
	// slowest is the slowest pass the summary reports, slowestScope
	// says of what ("since the scheduler started"), and passWhen, if set,
	// says when a pass ended by its Ago.
	slowest      stats.Pass
	slowestScope string
	passWhen     func(ago time.Duration) string
	// host is what the process and the host did over the window, if
	// known (HostKnown).
	host procDelta
	// spikes are the intervals of the time series with a spike, most
	// time lost first; notes counts the other intervals over the limit
	// (isNote); intervals counts them all, spikeScope says which they are
	// ("of the capture") and when names an interval's time.
	spikes     []spike
	notes      int
	intervals  int
	spikeScope string
	when       func(*sample) string
}

// write prints the summary as aligned plain text.
func (sm *summary) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	for _, h := range sm.header {
		p("%s\n", h)
	}

	t := &sm.total
	p("\ntimers\tcount")
	if sm.elapsed > 0 {
		p("\tper second")
	}
	p("\n")
	for _, c := range []struct {
		name string
		n    uint64
	}{
		{"scheduled", t.Scheduled}, {"fired", t.Fired}, {"cancelled", t.Cancelled},
		{"  taken back at once", t.TakenBack},
		{"reset", t.Reset}, {"stopped", t.Stopped}, {"panics", t.Panics},
		{"transfer cap hits", t.CapHits},
		{"ticks", t.Ticks}, {"ticks skipped (idle)", t.TicksSkipped}, {"refiled", t.Refiled},
	} {
		p("%s\t%d", c.name, c.n)
		if sm.elapsed > 0 {
			p("\t%s", units.Rate(float64(c.n)/sm.elapsed.Seconds()))
		}
		p("\n")
	}
	p("\nnow\n")
	p("pending\t%d\n", sm.pending)
	p("resident\t%d\n", t.Resident)
	p("queued\t%d\n", t.Queued)
	p("ring peak (since start; last minute)\t%d; %d\n", t.QueuedPeak, t.Recent.QueuedPeak)
	p("transfer peak (since start; last minute)\t%d; %d\n", t.TransferPeak, t.Recent.TransferPeak)
	p("re-filed by one pass, peak (since start; last minute)\t%d; %d\n", t.RefiledPeak, t.Recent.RefiledPeak)
	p("slowest pass (since start)\t%s\n", describePass(t.SlowestPass))
	p("slowest pass (last minute)\t%s\n", describePass(t.Recent.SlowestPass))

	p("\nlatency\tcount\tp50\tp90\tp99\tp99.9\tmax\tmean\n")
	for _, d := range []struct {
		name string
		d    dist
	}{
		{"tick lag", t.TickLag}, {"lateness", t.Lateness}, {"pass time", t.PassTime},
		{"task time", t.TaskTime},
	} {
		p("%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", d.name, d.d.Count,
			units.Duration(d.d.P50), units.Duration(d.d.P90), units.Duration(d.d.P99), units.Duration(d.d.P999),
			units.Duration(d.d.Max), units.Duration(d.d.Mean))
	}

	p("\nshard\tresident\tscheduled\tfired\tcancelled\tqueued\tcap hits\tpanics" +
		"\tlag p99\tlate p99\tlate max\ttask max\n")
	for i, v := range sm.shards {
		p("%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", i,
			v.Resident, v.Scheduled, v.Fired, v.Cancelled, v.Queued, v.CapHits, v.Panics,
			units.Duration(v.TickLag.P99), units.Duration(v.Lateness.P99), units.Duration(v.Lateness.Max),
			units.Duration(v.TaskTime.Max))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	var b strings.Builder
	b.WriteString("\ndiagnosis\n")
	for _, f := range sm.findings() {
		fmt.Fprintf(&b, "  - %s\n", f.Text)
	}
	if len(sm.spikes) > 0 {
		fmt.Fprintf(&b, "\nspikes (%s), most time lost first\n", spikeRule(sm.tick))
		for _, l := range sm.spikeLines() {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// diagnosis returns the lines of the diagnosis write prints: the
// findings, then the spikes, each line starting "spike ", and the count
// of those left out.
func (sm *summary) diagnosis() []string {
	var out []string
	for _, f := range sm.findings() {
		out = append(out, f.Text)
	}
	for i, l := range sm.spikeLines() {
		if i < maxSpikes {
			l = "spike " + l
		}
		out = append(out, l)
	}
	return out
}
