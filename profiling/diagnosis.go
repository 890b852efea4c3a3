package profiling

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/hostcpu"
	"github.com/shardwheel/shardwheel/internal/units"
	"github.com/shardwheel/shardwheel/stats"
)

// timerSlack is how late Go's timers may wake a sleeping shard: on Linux
// the runtime waits in epoll with millisecond granularity and rounds
// shorter waits up (golang/go#44343), so ticks start up to about 1ms late
// even on an idle machine.
const timerSlack = time.Millisecond

// lateLimit is the tick lag and lateness beyond which the reports say a
// shard fell behind: the wheel's resolution (one tick) plus timerSlack.
func lateLimit(tick time.Duration) time.Duration { return tick + timerSlack }

// incidentSlack is how far past lateLimit one late tick or timer must be
// for its interval to count as a spike on its own, its p99 within the
// limit. A goroutine made runnable while every P runs a busy goroutine
// waits for one of them to be preempted, which Go does once it has run
// 10ms and sysmon, which checks at most every 10ms, notices: waits of up
// to about 20ms are routine jitter on a busy process, and a worst case
// within them, with p99 on time, is information, not an incident.
const incidentSlack = 20 * time.Millisecond

// incidentLimit is the worst tick lag or lateness that makes an interval
// a spike whatever its p99.
func incidentLimit(tick time.Duration) time.Duration { return lateLimit(tick) + incidentSlack }

// nodeCost is a generous cost of moving one timer node within the wheel
// or from a queue into it.
const nodeCost = 200 * time.Nanosecond

// gcShareLimit is the share of the CPU the GC must have taken from
// goroutines in an interval for a wait for a P to be put down to it: the
// GC aims at 25% while it marks, and takes more only when goroutines
// allocate faster than it marks (assists).
const gcShareLimit = 0.25

// saturationLimit is the share of the CPU time its Ps offered that the
// process must have used or waited for in an interval (procDelta's
// Saturation) for a late tick to be put down to busy Ps: a due timer
// then waits for a running goroutine's preemption, 10ms or more apart.
const saturationLimit = 0.9

// maxSpikes is how many spikes the summaries list, most time lost first.
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
	causeCPU     cause = "cpu"     // a shard goroutine was runnable and not running
	causeGC      cause = "gc"      // the garbage collector: its pauses, or the CPU it took
	causeTasks   cause = "tasks"   // tasks waited behind other tasks
	causeBurst   cause = "burst"   // new timers beyond the transfer cap, or a pass's many
	causeCascade cause = "cascade" // a pass re-filed many timers
	causeUnknown cause = "unknown" // none the figures show
)

// causeNames names causes for a reader.
var causeNames = map[cause]string{
	causeCPU: "waiting for a CPU", causeGC: "garbage collection", causeTasks: "waiting behind a task",
	causeBurst: "a burst of new timers", causeCascade: "a cascade of re-filed timers",
	causeUnknown: "no cause the figures show",
}

// namesOf names causes for a reader, joined with "and".
func namesOf(causes []cause) string {
	names := make([]string, len(causes))
	for i, c := range causes {
		names[i] = causeNames[c]
	}
	return strings.Join(names, " and ")
}

// minP99 is the fewest values whose p99 the grading heeds: the p99 of
// fewer is their maximum, which incidentLimit judges.
const minP99 = 100

// isSpike reports whether the interval s is a spike: its p99 tick lag or
// lateness, of minP99 values or more, over lateLimit, or its worst over
// incidentLimit.
func isSpike(s *sample, tick time.Duration) bool {
	over := func(d dist) bool { return d.Count >= minP99 && d.P99 > lateLimit(tick) }
	return over(s.Lateness) || over(s.TickLag) || max(s.TickLag.Max, s.Lateness.Max) > incidentLimit(tick)
}

// isNote reports whether the interval s had a tick lag or lateness over
// lateLimit without being a spike: information, not an incident.
func isNote(s *sample, tick time.Duration) bool {
	return !isSpike(s, tick) && max(s.TickLag.Max, s.Lateness.Max) > lateLimit(tick)
}

// spike is a sampling interval that isSpike, with what its figures show.
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
	return fmt.Sprintf("%s lost above the limit; lateness max %s (p99 %s), tick lag max %s (p99 %s), longest pass %s",
		units.Duration(s.Lost), units.Duration(s.Lateness.Max), units.Duration(s.Lateness.P99),
		units.Duration(s.TickLag.Max), units.Duration(s.TickLag.P99), units.Duration(s.PassTime.Max))
}

// explanation says what the spike's figures point to, when giving an
// interval's time.
func (sp *spike) explanation(when func(*sample) string) string {
	if sp.after != nil {
		return fmt.Sprintf("the tail of the stall %s: timers due during it ran late in this interval; that one points to %s",
			when(sp.after), namesOf(sp.causes))
	}
	return sp.why
}

// text describes the spike, when giving an interval's time.
func (sp *spike) text(when func(*sample) string) string {
	return fmt.Sprintf("%s: %s; %s", when(sp.sample), sp.figures(), sp.explanation(when))
}

// findSpikes returns the intervals of samples that are spikes, most time
// lost first (then the worse, then the earlier), and how many others had
// a tick lag or lateness over the limit (isNote).
func findSpikes(tick time.Duration, samples []sample) (spikes []spike, notes int) {
	for i := range samples {
		s := &samples[i]
		if !isSpike(s, tick) {
			if isNote(s, tick) {
				notes++
			}
			continue
		}
		causes, why := explain(s, tick)
		sp := spike{sample: s, causes: causes, why: why}
		// Timers due during a stall that straddles two intervals run,
		// late, in the second, whose own passes may then be short: the
		// stall is the interval before's when one of its passes was half
		// as long as this one's worst delay, or a task blocked in it and
		// the shards were on time here, or, when nothing here shows a
		// cause, when any of its figures was.
		if i > 0 && isSpike(&samples[i-1], tick) && 2*s.PassTime.Max < sp.worst() {
			prev := &samples[i-1]
			unknown := slices.Equal(causes, []cause{causeUnknown})
			// A key's timers held behind a task that blocked in the
			// interval before run late here, the shards on time.
			held := (prev.BlockedRuns > 0 || len(prev.Blocked) > 0) && 2*s.TickLag.Max < s.Lateness.Max
			if 2*prev.PassTime.Max >= sp.worst() || held ||
				unknown && 2*max(prev.TickLag.Max, prev.PassTime.Max, prev.Lateness.Max) >= sp.worst() {
				if pc, _ := explain(prev, tick); !slices.Equal(pc, []cause{causeUnknown}) {
					sp.after, sp.causes = prev, pc
				}
			}
		}
		spikes = append(spikes, sp)
	}
	slices.SortStableFunc(spikes, func(a, b spike) int {
		return cmp.Or(cmp.Compare(b.sample.Lost, a.sample.Lost), cmp.Compare(b.worst(), a.worst()))
	})
	return spikes, notes
}

// explanation collects the causes of a spike and the sentences that say
// why.
type explanation struct {
	causes []cause
	whys   []string
}

// has reports whether c is among e's causes.
func (e *explanation) has(c cause) bool { return slices.Contains(e.causes, c) }

// add adds cause c with its sentence.
func (e *explanation) add(c cause, format string, args ...any) {
	e.causes = append(e.causes, c)
	e.whys = append(e.whys, fmt.Sprintf(format, args...))
}

// explain says what the figures of s, an interval with a spike, point
// to. A task is late because its shard's pass that fired it took long (it
// moved many timers, or it lost its CPU mid-pass), because the shard did
// not start the pass (its goroutine was runnable and not running), or,
// after the pass handed it to its runner, because it waited there: behind
// a task of its key that blocked (which Stats names), or for the runner to
// get a CPU. Timer moves are counted in every pass; "waiting for a CPU"
// needs the runtime's scheduling latencies or the OS's run-queue wait to
// show a wait half as long as the delay it explains, and garbage
// collection its pauses or its share of the CPU; the process using its
// Ps' CPU time (saturationLimit) shows a wait for a CPU whatever its
// length; when nothing shows, the cause is unknown.
func explain(s *sample, tick time.Duration) ([]cause, string) {
	var e explanation
	lag, late := s.TickLag.Max, s.Lateness.Max
	worst := max(lag, late)
	pass := s.PassTime.Max
	if s.CapHits > 0 {
		e.add(causeBurst, "a burst beyond the transfer cap: %d ticks reached the cap, so new timers waited in the queues "+
			"for later ticks (raise WithTransferCap or add shards)", s.CapHits)
	}
	switch {
	case 2*max(lag, pass) < late && (s.BlockedRuns > 0 || len(s.Blocked) > 0):
		// The shards were on time and their passes short: the tasks
		// waited after they were handed over, behind a task that
		// blocked. On saturated Ps a runner preempted in a short task
		// holds the tasks behind it as long, and the task counts as
		// blocked once it has returned: with none still running, the
		// wait for a CPU comes first.
		if len(s.Blocked) == 0 && s.Proc.Saturation >= saturationLimit {
			explainWait(&e, s, late, fmt.Sprintf("timers ran up to %s late and ticks started up to %s late, and a "+
				"task preempted past WithBlockedAfter counts as blocked", units.Duration(late), units.Duration(lag)), false)
		}
		e.add(causeTasks, "waiting behind a blocked task: %s; the later timers of a blocked task's key wait for it "+
			"(tasks ran up to %s late while ticks started at most %s late): keep tasks short, or hand the blocking "+
			"ones off with WithExecutor", describeBlockedIn(s), units.Duration(late), units.Duration(lag))
	case 2*pass >= worst:
		// A pass at least half as long as the worst delay explains it;
		// what took the pass's time says why.
		switch {
		case explainMoves(&e, s, worst):
		case explainWait(&e, s, pass, fmt.Sprintf("a pass took %s with too little work counted to explain it",
			units.Duration(pass)), false):
		case s.CapHits == 0:
			e.add(causeUnknown, "a pass took %s with too little work counted to explain it, and no wait that long "+
				"shows (%s): the figures cannot tell why (see the profile at that time)", units.Duration(pass), waitFigures(s))
		}
	default:
		// Late with short passes: the shard goroutines did not run when
		// their timers were due, or the runners not when their tasks
		// were handed over. (Tick lag counts only the ticks a shard
		// planned to wake for; a shard woken early for a new timer that
		// then waited shows in lateness alone.)
		what := fmt.Sprintf("timers ran up to %s late and ticks started up to %s late while no pass took over %s",
			units.Duration(late), units.Duration(lag), units.Duration(pass))
		if t := s.TaskTime.Max; 2*lag < late && 2*t >= late {
			// The shards on time, and a task timed as long as the
			// delay: the tasks behind it waited for it.
			e.add(causeTasks, "waiting behind a task: tasks took up to %s, and the tasks handed "+
				"to a runner behind one wait for it until WithBlockedAfter: keep tasks short", units.Duration(t))
			explainTaskTime(&e, s, t)
			break
		}
		if !explainWait(&e, s, worst, what, false) && s.CapHits == 0 {
			e.add(causeUnknown, "%s, and no wait that long shows (%s): the figures cannot tell why (see the profile at "+
				"that time)", what, waitFigures(s))
		}
	}
	// A shorter stall the interval had beside its worst, over the limit
	// and at least a quarter as long as it: named after it, by what the
	// pass's own counts show.
	minor := max(worst/4, lateLimit(tick))
	if sp := s.SlowestPass; sp != nil && !e.has(causeCascade) && !e.has(causeBurst) {
		if work := time.Duration(sp.Refiled+sp.Transferred) * nodeCost; sp.Duration > minor && 2*work >= sp.Duration {
			explainMoves(&e, s, sp.Duration)
		}
	}
	return e.causes, strings.Join(e.whys, "; also ")
}

// describeBlockedIn names the blocked tasks of interval s: those still
// running at its end, or how many blocked in it.
func describeBlockedIn(s *sample) string {
	if len(s.Blocked) > 0 {
		f := "the longest still running is " + describeBlocked(s.Blocked[0])
		if n := len(s.Blocked); n > 1 {
			f += fmt.Sprintf(" (%d running)", n)
		}
		return f
	}
	return fmt.Sprintf("%d %s held up the tasks behind them for WithBlockedAfter and returned",
		s.BlockedRuns, plural(int(s.BlockedRuns), "task", "tasks"))
}

// explainMoves adds a cascade or a burst to e if one pass of the interval
// moved timers enough to take half of the worst delay, and reports
// whether it did. It needs that pass's own counts: the interval's slowest
// pass (sample.SlowestPass), or the new peak of re-filed timers a pass
// set; totals over the interval's many passes say nothing of one.
func explainMoves(e *explanation, s *sample, worst time.Duration) bool {
	if sp := s.SlowestPass; sp != nil {
		refiled, taken := time.Duration(sp.Refiled)*nodeCost, time.Duration(sp.Transferred)*nodeCost
		switch {
		case 2*(refiled+taken) < worst:
		case refiled >= taken:
			e.add(causeCascade, "a cascade: a pass of %s re-filed %d timers within the wheel (%d of them by cascades, the rest "+
				"Resets found at their old slot), about %s of work", units.Duration(sp.Duration), sp.Refiled, sp.Cascaded,
				units.Duration(refiled))
			return true
		case s.CapHits == 0:
			e.add(causeBurst, "a burst: a pass of %s took in %d new timers, about %s of work",
				units.Duration(sp.Duration), sp.Transferred, units.Duration(taken))
			return true
		default:
			return true // the cap's burst, already said
		}
	}
	if peak := time.Duration(s.RefiledPeak) * nodeCost; 2*peak >= worst {
		e.add(causeCascade, "a cascade: a pass re-filed %d timers within the wheel, about %s of work",
			s.RefiledPeak, units.Duration(peak))
		return true
	}
	return false
}

// explainWait adds garbage collection or a wait for a CPU, or both, to e
// if the interval's figures show a wait long enough to explain d, what, a
// phrase that says how the shard was late, could not explain otherwise,
// and reports whether they did. Against tasks timed as holding a shard
// (tasks), a wait must be half as long as d and show in the runtime's
// scheduling latencies; else a quarter as long will do there, the runtime
// sampling one scheduling in 8 or so (the shard goroutine's own wait is
// rarely among them), or the process's threads must have waited half as
// long in all on the OS's run queues: a sum over threads and the whole
// interval, which a busy host runs up without any one long wait; or the
// process's goroutines must have kept its Ps saturated (saturationLimit),
// when a goroutine's due timer waits for a P unseen by those latencies.
// The GC is named when it stopped the world half as long, or took
// gcShareLimit of the CPU while goroutines waited a quarter as long; a
// wait for a CPU when the GC took less, or when the GC is not named and
// the Ps were saturated (whatever kept them busy: a GC cycle that ends in
// the interval may count a share of it).
func explainWait(e *explanation, s *sample, d time.Duration, what string, tasks bool) bool {
	p := s.Proc
	goWait := 4*p.SchedMax >= d
	if tasks {
		goWait = 2*p.SchedMax >= d
	}
	osWait := !tasks && p.HostKnown && 2*p.ThreadWait >= d
	saturated := !tasks && p.Saturation >= saturationLimit
	gcShare := p.GCCycles > 0 && p.GCShare >= gcShareLimit
	named := false
	switch {
	case p.GCCycles > 0 && 2*p.GCPauseMax >= d:
		e.add(causeGC, "garbage collection: %s, and the GC stopped the world for up to %s (%d %s ended in the interval): "+
			"allocate less, or raise GOGC or GOMEMLIMIT", what, units.Duration(p.GCPauseMax), p.GCCycles, cyclesOf(p.GCCycles))
		named = true
	case gcShare && (goWait || osWait):
		e.add(causeGC, "garbage collection: %s; meanwhile %d %s took %.0f%% of the CPU and goroutines waited up to %s "+
			"for a P: allocate less, or raise GOGC or GOMEMLIMIT", what, p.GCCycles, cyclesOf(p.GCCycles), 100*p.GCShare,
			units.Duration(p.SchedMax))
		named = true
	}
	var cpu []string
	if goWait && !gcShare {
		cpu = append(cpu, fmt.Sprintf("runnable goroutines waited up to %s for a P (p99 %s; the runtime's scheduling "+
			"latencies): more goroutines wanted to run than GOMAXPROCS allows (busy goroutines, GC workers)",
			units.Duration(p.SchedMax), units.Duration(p.SchedP99)))
	}
	if saturated && !named {
		cpu = append(cpu, fmt.Sprintf("the process used %.0f%% of the CPU time its %d Ps offered: its goroutines kept "+
			"every P busy, and a goroutine whose timer is due waits for one of them to be preempted (the runtime's "+
			"latencies count only the wait after the timer has run)", 100*p.Saturation, p.Procs))
	}
	if osWait {
		busy := ""
		if p.OtherCores >= hostcpu.BusyCores(runtime.NumCPU()) {
			busy = " (a busy host)"
		}
		cpu = append(cpu, fmt.Sprintf("the process's threads waited %s in all on the OS's run queues while other processes "+
			"kept %s of %d CPUs busy%s", units.Duration(p.ThreadWait), units.Sig(p.OtherCores), runtime.NumCPU(), busy))
	}
	if len(cpu) > 0 {
		e.add(causeCPU, "waiting for a CPU: %s, and %s (see the profile at that time)", what, strings.Join(cpu, "; "))
		named = true
	}
	return named
}

// explainTaskTime adds to e what else the interval's figures show may
// have taken part of the time tasks held a shard, tasks: the GC, whose
// assists an allocating task's time includes, when it took gcShareLimit
// of the CPU; a busy host, when the process's threads waited on the OS's
// run queues as long as tasks in all and for half the interval's length
// or more (half a thread waiting all along), other processes keeping
// BusyCores busy: the OS may then have held a task's thread that long.
// A busier host's waits are otherwise no evidence against timed tasks: a
// sum over threads and the interval, run up without any one long wait.
func explainTaskTime(e *explanation, s *sample, tasks time.Duration) {
	p := s.Proc
	if p.GCCycles > 0 && p.GCShare >= gcShareLimit {
		e.add(causeGC, "garbage collection: %d %s took %.0f%% of the CPU meanwhile, and a task that allocates helps the GC "+
			"mark (an assist), which its time includes: allocate less, or raise GOGC or GOMEMLIMIT", p.GCCycles, cyclesOf(p.GCCycles),
			100*p.GCShare)
	}
	if p.HostKnown && p.ThreadWait >= tasks && 2*p.ThreadWait >= s.Span && p.OtherCores >= hostcpu.BusyCores(runtime.NumCPU()) {
		e.add(causeCPU, "waiting for a CPU: the process's threads waited %s in all on the OS's run queues in the interval, "+
			"other processes keeping %s of %d CPUs busy: the OS may have held a task's thread for part of the tasks' %s",
			units.Duration(p.ThreadWait), units.Sig(p.OtherCores), runtime.NumCPU(), units.Duration(tasks))
	}
}

// waitFigures says what the interval's figures show of waits, for an
// unknown cause.
func waitFigures(s *sample) string {
	p := s.Proc
	f := fmt.Sprintf("goroutines waited up to %s for a P", units.Duration(p.SchedMax))
	if p.HostKnown {
		f += fmt.Sprintf(", threads %s in all for a CPU", units.Duration(p.ThreadWait))
	}
	if p.Saturation > 0 {
		f += fmt.Sprintf(", the Ps %.0f%% busy", 100*p.Saturation)
	}
	if p.GCCycles > 0 {
		f += fmt.Sprintf(", GC pauses up to %s", units.Duration(p.GCPauseMax))
	}
	return f
}

// findings interprets the window for a reader who wants to know whether
// timers were late and why: the lateness and tick lag percentiles up to
// the maximum, the slowest pass, tasks, the transfer cap, panics, a busy
// host, and a line on the spikes, which the summary lists.
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
	causes := "the spikes say why, interval by interval"
	if len(sm.spikes) == 0 {
		causes = "no interval was a spike (see the slowest pass)"
	}
	switch g := t.TickLag; {
	case g.P99 > limit:
		warn("shards started ticks late: tick lag p99 %s, p99.9 %s and max %s; %s",
			units.Duration(g.P99), units.Duration(g.P999), units.Duration(g.Max), causes)
	case g.Max > limit:
		warn("shards started some ticks late: tick lag p99 %s is within %s, but p99.9 is %s and max %s; %s",
			units.Duration(g.P99), units.Duration(limit), units.Duration(g.P999), units.Duration(g.Max), causes)
	}
	if sp := sm.slowest; sp.Duration > limit {
		when := ""
		if sm.passWhen != nil {
			when = ", ended " + sm.passWhen(sp.Ago)
		}
		warn("the slowest pass %s: %s%s; %s", sm.slowestScope, describePass(sp), when, stallCause(sp))
	}
	if tt := t.TaskTime; tt.Max > sm.tick {
		warn("tasks ran up to %s (p99 %s): a task delays the tasks queued behind it on its shard's runner, until "+
			"WithBlockedAfter moves them on, and its key's later timers until it returns; keep tasks short, or hand the "+
			"long ones off with WithExecutor", units.Duration(tt.Max), units.Duration(tt.P99))
	}
	if t.BlockedRuns > 0 || len(t.Blocked) > 0 {
		warn("blocked tasks: %s", describeBlockedRuns(t))
	}
	if t.BlockedRefused > 0 {
		warn("%d looks at a blocked task refused: WithMaxBlockedTasks tasks were blocked already, so the tasks behind "+
			"them waited; raise it, or keep tasks short", t.BlockedRefused)
	}
	if t.CapHits > 0 {
		warn("ticks reached the transfer cap %d times: new timers waited in the queues for later ticks; "+
			"raise WithTransferCap or add shards", t.CapHits)
	}
	if t.Panics > 0 {
		warn("%d tasks panicked (see the panic handler's output)", t.Panics)
	}
	if h := sm.host; h.HostKnown && h.OtherCores >= hostcpu.BusyCores(runtime.NumCPU()) {
		warn("the host was busy: other processes kept %s of %d CPUs busy on average and this process's threads waited %s "+
			"in all for a CPU: expect inflated latencies", units.Sig(h.OtherCores), runtime.NumCPU(), units.Duration(h.ThreadWait))
	}
	if n := len(sm.spikes); n > 0 {
		worst := &sm.spikes[0]
		warn("%d of %d intervals %s were spikes (%s); the one that lost the most, %s, lost %s and points to %s",
			n, sm.intervals, sm.spikeScope, spikeRule(sm.tick), sm.when(worst.sample), units.Duration(worst.sample.Lost),
			namesOf(worst.causes))
	}
	if sm.notes > 0 {
		out = append(out, finding{Text: fmt.Sprintf("%d other %s %s had a tick lag or lateness over %s, but neither a p99 "+
			"over it (of %d values or more) nor a value over %s: routine jitter, not listed", sm.notes,
			plural(sm.notes, "interval", "intervals"), sm.spikeScope, units.Duration(limit), minP99, units.Duration(incidentLimit(sm.tick))), OK: true})
	}
	return out
}

// spikeRule says what makes an interval a spike.
func spikeRule(tick time.Duration) string {
	return fmt.Sprintf("tick lag or lateness p99 over %s (of %d values or more), or a value over %s",
		units.Duration(lateLimit(tick)), minP99, units.Duration(incidentLimit(tick)))
}

// cyclesOf names n GC cycles.
func cyclesOf(n uint64) string { return plural(int(n), "GC cycle", "GC cycles") }

// plural returns one or many by n.
// describeBlockedRuns says what the blocked tasks of the window t did:
// how many held up the tasks behind them past WithBlockedAfter (which went
// on on another runner), and which ran longest (of the scheduler's life)
// and which still run.
func describeBlockedRuns(t *view) string {
	f := fmt.Sprintf("%d %s held up the tasks behind them past WithBlockedAfter, which went on on another runner "+
		"(the later timers of a blocked task's key waited for it)",
		t.BlockedRuns, plural(int(t.BlockedRuns), "task", "tasks"))
	if l := t.LongestBlocked; l.Running > 0 {
		f += "; the longest since the start, " + describeBlocked(l)
		if len(t.Blocked) > 0 && t.Blocked[0] == l {
			f += " so far"
		}
	}
	if n := len(t.Blocked); n > 0 {
		f += fmt.Sprintf("; %d still running, the longest %s", n, describeBlocked(t.Blocked[0]))
	}
	return f + ": keep tasks short, or hand the blocking ones off with WithExecutor"
}

// describeBlocked names a blocked task: its function, its key, how long
// it ran.
func describeBlocked(b stats.BlockedTask) string {
	name := b.Func
	if name == "" {
		name = "a task"
	}
	key := "no key"
	if b.Keyed {
		key = "key " + strconv.FormatUint(b.Key, 10)
	}
	return fmt.Sprintf("%s (%s), ran %s", name, key, units.Duration(b.Running))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// spikeLines returns one line per listed spike, most time lost first,
// and a last line counting those left out.
func (sm *summary) spikeLines() []string {
	var out []string
	for i := range sm.spikes[:min(len(sm.spikes), maxSpikes)] {
		sp := &sm.spikes[i]
		out = append(out, sp.text(sm.when))
	}
	if n := len(sm.spikes) - maxSpikes; n > 0 {
		out = append(out, fmt.Sprintf("%d more %s, smaller: see the charts", n, plural(n, "spike", "spikes")))
	}
	return out
}

// describePass says what one pass of a shard goroutine did.
func describePass(p stats.Pass) string {
	return fmt.Sprintf("%s, %d tasks handed to the runner, %d new timers taken in, %d re-filed (%d by cascades)",
		units.Duration(p.Duration), p.Fired, p.Transferred, p.Refiled, p.Cascaded)
}

// stallCause says what took a slow pass's time, by its own counts.
func stallCause(p stats.Pass) string {
	moves := time.Duration(p.Transferred+p.Refiled) * nodeCost
	if 2*moves >= p.Duration {
		return fmt.Sprintf("moving timers took most of it (about %s)", units.Duration(moves))
	}
	return fmt.Sprintf("%s of it was not moving timers: its goroutine was not running then "+
		"(waiting for a CPU, or a GC pause or assist; the spikes' figures may say which)", units.Duration(p.Duration-moves))
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
