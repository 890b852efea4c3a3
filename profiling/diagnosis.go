package profiling

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/units"
)

// timerSlack is how late Go's timers may wake a sleeping shard: on Linux
// the runtime waits in epoll with millisecond granularity and rounds
// shorter waits up (golang/go#44343), so ticks start up to about 1ms late
// even on an idle machine.
const timerSlack = time.Millisecond

// lateLimit is the tick lag and lateness beyond which the reports say a
// shard fell behind: the wheel's resolution (one tick) plus timerSlack.
func lateLimit(tick time.Duration) time.Duration { return tick + timerSlack }

// taskSampling is how many tasks a shard runs per task it times
// (ShardStats.TaskTime).
const taskSampling = 16

// nodeCost is a generous cost of moving one timer node within the wheel
// or from a queue into it.
const nodeCost = 200 * time.Nanosecond

// maxSpikes is how many spikes the summaries list, worst first.
const maxSpikes = 5

// finding is one line of a summary's diagnosis; OK is set on the line
// that says there is nothing wrong.
type finding struct {
	Text string
	OK   bool
}

// cause is what the counters of an interval point to as the reason for
// its spike.
type cause string

const (
	causeCPU     cause = "cpu"     // the shard goroutines waited for a CPU
	causeTasks   cause = "tasks"   // tasks took the passes' time
	causeBurst   cause = "burst"   // new timers beyond the transfer cap
	causeCascade cause = "cascade" // a pass re-filed many timers
	causeUnknown cause = "unknown" // none of the above
)

// spike is a sampling interval whose tick lag or lateness exceeded
// lateLimit, with what its counters show.
type spike struct {
	sample *sample
	causes []cause
	why    string // the explanation, after the figures
	// after is the interval before, when this one's lateness is the tail
	// of a stall there, whose causes are then causes.
	after *sample
}

// worst is the spike's larger maximum, tick lag or lateness.
func (sp *spike) worst() time.Duration { return max(sp.sample.TickLag.Max, sp.sample.Lateness.Max) }

// figures describes the spike's interval by its counters.
func (sp *spike) figures() string {
	s := sp.sample
	return fmt.Sprintf("lateness max %s (p99 %s), tick lag max %s, longest pass %s",
		units.Duration(s.Lateness.Max), units.Duration(s.Lateness.P99), units.Duration(s.TickLag.Max), units.Duration(s.PassTime.Max))
}

// explanation says what the spike's counters point to, when giving an
// interval's time.
func (sp *spike) explanation(when func(*sample) string) string {
	if sp.after != nil {
		return fmt.Sprintf("the tail of the stall %s: timers due during it ran late in this interval; that one points to %s",
			when(sp.after), causeNames(sp.causes))
	}
	return sp.why
}

// text describes the spike, when giving an interval's time.
func (sp *spike) text(when func(*sample) string) string {
	return fmt.Sprintf("%s: %s; %s", when(sp.sample), sp.figures(), sp.explanation(when))
}

// findSpikes returns the intervals of samples whose tick lag or lateness
// exceeded lateLimit(tick), worst first (the earlier of equals first).
func findSpikes(tick time.Duration, samples []sample) []spike {
	limit := lateLimit(tick)
	var out []spike
	for i := range samples {
		s := &samples[i]
		if s.TickLag.Max <= limit && s.Lateness.Max <= limit {
			continue
		}
		causes, why := explain(s, tick)
		sp := spike{sample: s, causes: causes, why: why}
		// Timers due during a stall that straddles two intervals run,
		// late, in the second, whose own tick lag and passes may then
		// be short.
		if i > 0 && len(causes) == 1 && causes[0] == causeUnknown {
			prev := &samples[i-1]
			if 2*max(prev.TickLag.Max, prev.PassTime.Max, prev.Lateness.Max) >= s.Lateness.Max {
				sp.after = prev
				sp.causes, _ = explain(prev, tick)
			}
		}
		out = append(out, sp)
	}
	slices.SortStableFunc(out, func(a, b spike) int { return cmp.Compare(b.worst(), a.worst()) })
	return out
}

// explain says what the counters of s, an interval with a spike, point
// to. The reasoning compares how late the shards were with how long their
// passes took: a shard that was late while its passes were short was not
// running at all, so its goroutine waited for a CPU; one whose passes
// took as long as it was late was busy, and the counters say with what:
// tasks, a cascade of re-filed timers, or a burst of new ones.
func explain(s *sample, tick time.Duration) ([]cause, string) {
	lag, late, pass := s.TickLag.Max, s.Lateness.Max, s.PassTime.Max
	worst := max(lag, late)
	var causes []cause
	var whys []string
	add := func(c cause, format string, args ...any) {
		causes = append(causes, c)
		whys = append(whys, fmt.Sprintf(format, args...))
	}
	if s.CapHits > 0 {
		add(causeBurst, "a burst beyond the transfer cap: %d ticks reached the cap, so new timers waited in the queues "+
			"for later ticks (raise WithTransferCap or add shards)", s.CapHits)
	}
	// Passes that took at least half as long as the worst delay explain
	// it, one long pass or several back to back (a timer due during the
	// first waits for them all); shorter ones do not.
	passes := time.Duration(s.PassTime.Count) * s.PassTime.Mean
	if 2*max(pass, passes) >= worst {
		// Task time is timed one task in taskSampling: scale its sum up
		// to compare it with the passes'.
		tasks := time.Duration(s.TaskTime.Count*taskSampling) * s.TaskTime.Mean
		moved := max(s.RefiledPeak, 0)
		if sp := s.SlowestPass; sp != nil {
			moved = max(moved, sp.Refiled)
		}
		switch {
		case s.TaskTime.Max > tick && 2*s.TaskTime.Max >= pass || passes > 0 && 2*tasks >= passes:
			add(causeTasks, "long tasks: tasks took about %s of the passes' %s (the longest timed task, one in %d is, ran %s): "+
				"keep tasks short or hand them off with WithExecutor",
				units.Duration(min(tasks, passes)), units.Duration(passes), taskSampling, units.Duration(s.TaskTime.Max))
		case time.Duration(moved)*nodeCost*2 >= pass:
			add(causeCascade, "a cascade: one pass re-filed %d timers within the wheel, which takes about %s",
				moved, units.Duration(time.Duration(moved)*nodeCost))
		case s.SlowestPass != nil && time.Duration(s.SlowestPass.Transferred)*nodeCost*2 >= pass:
			if s.CapHits == 0 {
				add(causeBurst, "a burst: one pass took in %d new timers", s.SlowestPass.Transferred)
			}
		case s.CapHits == 0:
			add(causeCPU, "waiting for a CPU: passes took up to %s with no long task timed, no cascade and no burst counted, "+
				"so a shard goroutine most likely lost its CPU mid-pass (GOMAXPROCS, CPU quota, GC or busy goroutines: "+
				"see the profile at that time)", units.Duration(pass))
		}
	} else if 2*lag >= worst {
		add(causeCPU, "waiting for a CPU: ticks started up to %s late while no pass took over %s, so the shard goroutines "+
			"were runnable but not running (GOMAXPROCS, CPU quota, GC or busy goroutines: see the profile at that time)",
			units.Duration(lag), units.Duration(pass))
	}
	if len(causes) == 0 {
		add(causeUnknown, "timers ran late though ticks started on time and passes were short: the counters show no cause "+
			"(see the profile at that time)")
	}
	why := whys[0]
	for _, w := range whys[1:] {
		why += "; also " + w
	}
	return causes, why
}

// findings interprets the window for a reader who wants to know whether
// timers were late and why: the lateness and tick lag percentiles up to
// the maximum, the slowest pass, tasks, the transfer cap and panics, and
// a line on the spikes, which the summary lists.
func (sm *summary) findings() []finding {
	t := &sm.total
	limit := lateLimit(sm.tick)
	within := fmt.Sprintf("one tick plus %s of timer slack (%s)", units.Duration(timerSlack), units.Duration(limit))
	var out []finding
	warn := func(format string, args ...any) { out = append(out, finding{Text: fmt.Sprintf(format, args...)}) }
	l := t.Lateness
	switch {
	case t.Fired == 0:
		out = append(out, finding{Text: "no timer fired", OK: true})
	case l.Count == 0:
		warn("timers fired but no latencies were recorded: WithStats(false) turned the histograms off")
	case l.P99 > limit:
		f := fmt.Sprintf("timers ran late: lateness p99 %s, p99.9 %s and max %s exceed %s",
			units.Duration(l.P99), units.Duration(l.P999), units.Duration(l.Max), within)
		if worst := sm.worstShard(); worst >= 0 {
			f += fmt.Sprintf("; worst shard %d (p99 %s)", worst, units.Duration(sm.shards[worst].Lateness.P99))
		}
		warn("%s", f)
	case l.P999 > limit:
		warn("the tail ran late: lateness p99 %s is within %s, but p99.9 is %s and max %s",
			units.Duration(l.P99), within, units.Duration(l.P999), units.Duration(l.Max))
	case l.Max > limit:
		warn("a few timers ran late: lateness p99 %s and p99.9 %s are within %s, but max is %s",
			units.Duration(l.P99), units.Duration(l.P999), within, units.Duration(l.Max))
	default:
		out = append(out, finding{
			Text: fmt.Sprintf("ok: lateness p99 %s, p99.9 %s and max %s are within %s",
				units.Duration(l.P99), units.Duration(l.P999), units.Duration(l.Max), within),
			OK: true,
		})
	}
	causes := "a shard was held up by its own long tasks (see task time) or its goroutine waited for a CPU: " +
		"check GOMAXPROCS, CPU quotas, GC and busy goroutines in the profile"
	if len(sm.spikes) > 0 {
		causes = "the spikes below say which, interval by interval"
	}
	switch g := t.TickLag; {
	case g.P99 > limit:
		warn("shards started ticks late: tick lag p99 %s, p99.9 %s and max %s; %s",
			units.Duration(g.P99), units.Duration(g.P999), units.Duration(g.Max), causes)
	case g.Max > limit:
		warn("shards started some ticks late: tick lag p99 %s is within %s, but p99.9 is %s and max %s; %s",
			units.Duration(g.P99), units.Duration(limit), units.Duration(g.P999), units.Duration(g.Max), causes)
	}
	if sp := t.SlowestPass; sp.Duration > limit {
		warn("the slowest pass since the scheduler started: %s; %s", describePass(sp), stallCause(sp, t.TaskTime))
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
	if n := len(sm.spikes); n > 0 {
		worst := &sm.spikes[0]
		warn("%d of %d intervals %s had a spike, tick lag or lateness over %s; the worst, %s, points to %s",
			n, sm.intervals, sm.spikeScope, units.Duration(limit), sm.when(worst.sample), causeNames(worst.causes))
	}
	return out
}

// causeNames names causes for a reader.
func causeNames(causes []cause) string {
	names := map[cause]string{
		causeCPU: "waiting for a CPU", causeTasks: "long tasks", causeBurst: "a burst of new timers",
		causeCascade: "a cascade of re-filed timers", causeUnknown: "no cause the counters show",
	}
	s := ""
	for i, c := range causes {
		if i > 0 {
			s += " and "
		}
		s += names[c]
	}
	return s
}

// spikeLines returns one line per listed spike, worst first, and a last
// line counting those left out.
func (sm *summary) spikeLines() []string {
	var out []string
	for i := range sm.spikes[:min(len(sm.spikes), maxSpikes)] {
		sp := &sm.spikes[i]
		out = append(out, sp.text(sm.when))
	}
	if n := len(sm.spikes) - maxSpikes; n > 0 {
		noun := "spikes"
		if n == 1 {
			noun = "spike"
		}
		out = append(out, fmt.Sprintf("%d more %s, smaller: see the charts", n, noun))
	}
	return out
}

// describePass says what one pass of a shard goroutine did.
func describePass(p shardwheel.PassWork) string {
	return fmt.Sprintf("%s, %d new timers taken in, %d re-filed, %d tasks run",
		units.Duration(p.Duration), p.Transferred, p.Refiled, p.Fired)
}

// stallCause names the likeliest cause of a slow pass, given the
// distribution of task time over the same window.
func stallCause(p shardwheel.PassWork, tasks dist) string {
	work := time.Duration(p.Transferred+p.Refiled) * nodeCost
	switch {
	case p.Fired > 0 && tasks.Max > p.Duration/2:
		return fmt.Sprintf("one of its %d tasks may have taken most of it (the longest timed ran %s): "+
			"keep tasks short or hand them off with WithExecutor", p.Fired, units.Duration(tasks.Max))
	case time.Duration(p.Fired)*tasks.Mean > p.Duration/2:
		return fmt.Sprintf("its %d tasks, %s each on average, took most of it: "+
			"keep tasks short or hand them off with WithExecutor", p.Fired, units.Duration(tasks.Mean))
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
