package profiling

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/units"
)

// dist summarizes one latency distribution. Durations are integer
// nanoseconds in JSON, hence the _ns suffixes.
type dist struct {
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
	Mean  time.Duration `json:"mean_ns"`
	Count uint64        `json:"count"`
}

// summarize returns the distribution of the values recorded between the
// snapshots prev and cur of one histogram (Histogram.Sub).
func summarize(cur, prev shardwheel.Histogram) dist {
	d := cur.Sub(prev)
	p := dist{
		P50: d.Quantile(0.5), P90: d.Quantile(0.9), P99: d.Quantile(0.99), P999: d.Quantile(0.999),
		Max: d.Max(), Mean: d.Mean(), Count: d.Count(),
	}
	return p
}

// view is a ShardStats over a window: counters are differences between the
// window's end and start, gauges (Resident, Queued, TransferLast) are
// read at its end, and peaks (QueuedPeak, TransferPeak, RefiledPeak,
// SlowestPass) stay the peaks since the scheduler started, since they
// cannot be differenced. The embedded
// histograms hold the window's values (Histogram.Sub); the dist fields
// summarize them and, being shallower, replace them in JSON.
type view struct {
	shardwheel.ShardStats
	TickLag  dist `json:"tick_lag"`
	Lateness dist `json:"lateness"`
	TaskTime dist `json:"task_time"`
	PassTime dist `json:"pass_time"`
}

// newView returns the window from prev to cur. A zero prev makes the window
// the scheduler's whole life.
func newView(cur, prev shardwheel.ShardStats) view {
	v := view{ShardStats: cur.Sub(prev)}
	v.TickLag = summarize(cur.TickLag, prev.TickLag)
	v.Lateness = summarize(cur.Lateness, prev.Lateness)
	v.TaskTime = summarize(cur.TaskTime, prev.TaskTime)
	v.PassTime = summarize(cur.PassTime, prev.PassTime)
	return v
}

// views returns the window from prev to cur for the total and each shard.
// A zero prev (no shards) makes it the scheduler's whole life.
func views(cur, prev shardwheel.Stats) (total view, shards []view) {
	shards = make([]view, len(cur.Shards))
	for i, sh := range cur.Shards {
		var p shardwheel.ShardStats
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
		{"  taken back before filing", t.TakenBack},
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
	p("ring depth\t%d\n", t.Queued)
	p("ring peak (since start)\t%d\n", t.QueuedPeak)
	p("transfer peak (since start)\t%d\n", t.TransferPeak)
	p("re-filed by one pass, peak (since start)\t%d\n", t.RefiledPeak)
	p("slowest pass (since start)\t%s\n", describePass(t.SlowestPass))

	p("\nlatency\tcount\tp50\tp90\tp99\tp99.9\tmax\tmean\n")
	for _, d := range []struct {
		name string
		d    dist
	}{{"tick lag", t.TickLag}, {"lateness", t.Lateness}, {"task time", t.TaskTime}, {"pass time", t.PassTime}} {
		p("%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", d.name, d.d.Count,
			units.Duration(d.d.P50), units.Duration(d.d.P90), units.Duration(d.d.P99), units.Duration(d.d.P999),
			units.Duration(d.d.Max), units.Duration(d.d.Mean))
	}

	p("\nshard\tresident\tscheduled\tfired\tcancelled\tqueued\tcap hits\tpanics" +
		"\tlag p99\tlate p99\tlate max\ttask p99\n")
	for i, v := range sm.shards {
		p("%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", i,
			v.Resident, v.Scheduled, v.Fired, v.Cancelled, v.Queued, v.CapHits, v.Panics,
			units.Duration(v.TickLag.P99), units.Duration(v.Lateness.P99), units.Duration(v.Lateness.Max), units.Duration(v.TaskTime.P99))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if _, err := io.WriteString(w, "\ndiagnosis\n"); err != nil {
		return err
	}
	for _, f := range sm.findings() {
		if _, err := fmt.Fprintf(w, "  - %s\n", f.Text); err != nil {
			return err
		}
	}
	return nil
}

// timerSlack is how late Go's timers may wake a sleeping shard: on Linux
// the runtime waits in epoll with millisecond granularity and rounds
// shorter waits up (golang/go#44343), so ticks start up to about 1ms late
// even on an idle machine.
const timerSlack = time.Millisecond

// lateLimit is the tick lag and lateness beyond which the reports say a
// shard fell behind: the wheel's resolution (one tick) plus timerSlack.
func lateLimit(tick time.Duration) time.Duration { return tick + timerSlack }

// finding is one line of a summary's diagnosis; OK is set on the line
// that says there is nothing wrong.
type finding struct {
	Text string
	OK   bool
}

// findings interprets the window for a reader who wants to know whether
// timers were late and why.
func (sm *summary) findings() []finding {
	t := &sm.total
	limit := lateLimit(sm.tick)
	within := fmt.Sprintf("one tick plus %s of timer slack (%s)", units.Duration(timerSlack), units.Duration(limit))
	var out []finding
	warn := func(format string, args ...any) { out = append(out, finding{Text: fmt.Sprintf(format, args...)}) }
	switch {
	case t.Fired == 0:
		out = append(out, finding{Text: "no timer fired in this window", OK: true})
	case t.Lateness.Count == 0:
		warn("timers fired but no latencies were recorded: WithStats(false) turned the histograms off")
	case t.Lateness.P99 > limit:
		f := fmt.Sprintf("timers ran late: lateness p99 %s exceeds %s", units.Duration(t.Lateness.P99), within)
		if worst := sm.worstShard(); worst >= 0 {
			f += fmt.Sprintf("; worst shard %d (p99 %s)", worst, units.Duration(sm.shards[worst].Lateness.P99))
		}
		warn("%s", f)
	default:
		out = append(out, finding{
			Text: fmt.Sprintf("ok: lateness p99 %s is within %s", units.Duration(t.Lateness.P99), within),
			OK:   true,
		})
	}
	if t.TickLag.P99 > limit {
		warn("shards started ticks late (tick lag p99 %s): a shard was held up by its own long tasks (see task time) "+
			"or its goroutine waited for a CPU: check GOMAXPROCS, CPU quotas, GC and busy goroutines in the fgprof profile",
			units.Duration(t.TickLag.P99))
	}
	if sp := t.SlowestPass; sp.Duration > limit {
		warn("the slowest pass: %s; %s", describePass(sp), stallCause(sp, t.TaskTime))
	}
	if t.TaskTime.Max > sm.tick {
		warn("tasks ran for up to %s (p99 %s): a task longer than a tick delays the rest of its shard; "+
			"keep tasks short or hand them off with WithExecutor", units.Duration(t.TaskTime.Max), units.Duration(t.TaskTime.P99))
	}
	if t.CapHits > 0 {
		warn("ticks reached the transfer cap %d times: new timers waited in the queues for later ticks; "+
			"raise WithTransferCap or add shards", t.CapHits)
	}
	if t.Panics > 0 {
		warn("%d tasks panicked (see the panic handler's output)", t.Panics)
	}
	return out
}

// describePass says what one worker pass did.
func describePass(p shardwheel.PassWork) string {
	return fmt.Sprintf("%s, %d new timers taken in, %d re-filed, %d tasks run",
		units.Duration(p.Duration), p.Transferred, p.Refiled, p.Fired)
}

// stallCause names the likeliest cause of a slow pass.
func stallCause(p shardwheel.PassWork, tasks dist) string {
	const nodeCost = 200 * time.Nanosecond // a generous cost of moving one node
	work := time.Duration(p.Transferred+p.Refiled) * nodeCost
	switch {
	case p.Fired > 0 && tasks.Max > p.Duration/2:
		return "its tasks took most of it: keep tasks short or hand them off with WithExecutor"
	case work > p.Duration/2:
		return "moving timers took most of it"
	}
	return "it did too little work to take that long: the shard's goroutine waited for a CPU " +
		"(GOMAXPROCS, CPU quota, GC or busy goroutines: see the profile)"
}

// worstShard returns the shard with the highest lateness p99, or -1 when
// there is only one shard.
func (sm *summary) worstShard() int {
	if len(sm.shards) < 2 {
		return -1
	}
	worst := 0
	for i, v := range sm.shards {
		if v.Lateness.P99 > sm.shards[worst].Lateness.P99 {
			worst = i
		}
	}
	return worst
}
