package profiling

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/trace"
	"time"

	"github.com/felixge/fgprof"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/units"
	"github.com/shardwheel/shardwheel/stats"
)

const (
	// DefaultInterval is the sampling interval Capture uses when
	// CaptureConfig.Interval is 0.
	DefaultInterval = 250 * time.Millisecond
	// MinInterval is the shortest sampling interval Capture accepts. A
	// sample costs a Scheduler.Stats call (about 47 KB per shard), and an
	// interval of a few ticks holds too few values for its percentiles.
	MinInterval = 10 * time.Millisecond

	// minProfile is the shortest time the fgprof profile runs: its 99 Hz
	// sampler needs a few samples to compute the profile's period (see
	// stopProfile).
	minProfile = 100 * time.Millisecond
)

// The files Capture writes, in CaptureConfig.Dir.
const (
	textFile    = "report.txt"
	htmlFile    = "report.html"
	jsonFile    = "report.json"
	profileFile = "fgprof.pprof"
	traceFile   = "trace.out"
)

// CaptureConfig configures Capture.
type CaptureConfig struct {
	// Duration is how long to capture. It must be > 0.
	Duration time.Duration
	// Interval is the time-series sampling interval: 0 means
	// DefaultInterval, otherwise it must be at least MinInterval.
	Interval time.Duration
	// Dir is the directory to write to, created with its parents if
	// missing. Files of an earlier report there are replaced. It must not
	// be empty.
	Dir string
	// Trace also records an execution trace of the capture to trace.out
	// (Report.TracePath), for go tool trace: each pass of a shard's
	// goroutine is a region of type shardwheel.pass there, with its
	// shard's number and what it did in logs, so that a late tick shows
	// up on the timeline beside the goroutine that held the CPU. A
	// program runs one execution trace at a time: if one is running
	// already, Capture reports runtime/trace's error and goes on without.
	Trace bool
}

// check returns cfg with its defaults filled in, or an error naming the
// first invalid field.
func (cfg CaptureConfig) check() (CaptureConfig, error) {
	switch {
	case cfg.Duration <= 0:
		return cfg, fmt.Errorf("profiling: CaptureConfig.Duration must be > 0, got %v", cfg.Duration)
	case cfg.Interval < 0 || cfg.Interval > 0 && cfg.Interval < MinInterval:
		return cfg, fmt.Errorf("profiling: CaptureConfig.Interval must be 0 (for %v) or at least %v, got %v",
			DefaultInterval, MinInterval, cfg.Interval)
	case cfg.Dir == "":
		return cfg, errors.New(`profiling: CaptureConfig.Dir must not be empty, got ""`)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	return cfg, nil
}

// Report says what Capture wrote.
type Report struct {
	// Dir is CaptureConfig.Dir.
	Dir string
	// TextPath is report.txt, the text summary.
	TextPath string
	// HTMLPath is report.html, a self-contained page: headline
	// figures, the diagnosis and its spikes, plots over time of tick
	// lag, lateness and pass time (p50, p99 and max per interval, the
	// spikes that lost the most shaded), of tasks per pass, throughput,
	// pending and queued timers, the lateness and tick lag distributions,
	// the host's load, the trace file if one was made, and the summary.
	HTMLPath string
	// JSONPath is report.json: the configuration, the time series, the
	// capture's totals per shard and the scheduler's final Stats.
	JSONPath string
	// ProfilePath is fgprof.pprof, a wall-clock profile of the whole
	// program over the capture, for go tool pprof.
	ProfilePath string
	// TracePath is trace.out, the execution trace, when
	// CaptureConfig.Trace asked for one; empty otherwise.
	TracePath string
	// Summary is the text of report.txt.
	Summary string
	// Diagnosis is the diagnosis that ends Summary, a line each: the
	// findings over the whole capture (lateness and tick lag at p99,
	// p99.9 and max, the slowest pass, tasks, the transfer cap, panics,
	// a busy host, how many sampling intervals were spikes and how many
	// others went over the limit: see the package documentation), then,
	// most time lost first, up to five spikes, each line starting "spike
	// at" with its span into the capture, then what the figures show in
	// it and the cause they point to, and a last line counting the spikes
	// left out.
	Diagnosis []string
}

// Capture watches s for cfg.Duration and writes a report of it to cfg.Dir:
// report.txt, report.html, report.json, fgprof.pprof and, if cfg.Trace,
// trace.out (see Report). While
// it runs, an fgprof profile records every goroutine and, every
// cfg.Interval, a sample records the interval's tick lag, lateness, pass
// time, tasks per pass and task time percentiles, its fired, scheduled
// and cancelled rates, its ticks, re-filed timers and transfer cap hits,
// the pending count and queue depth at its end, and what the process and
// the host did (the runtime's scheduling latencies, GC cycles, pauses and
// CPU share, other processes' CPU and this process's threads' run-queue
// wait). The summary covers the whole capture; its diagnosis explains
// each spike from its interval's sample alone, so that it names the
// moment and the cause, which the totals dilute. Capture
// blocks until done and may run alongside other Captures and profiles
// (one execution trace at a time: see CaptureConfig.Trace).
//
// If ctx ends first, Capture stops early and still writes its files,
// covering the time captured; it then returns the Report together with an
// error wrapping ctx.Err(), so errors.Is(err, context.Canceled) tells an
// interruption from a failure. It also returns the Report, with an error,
// if a file could not be written. It returns a nil Report only when cfg is
// invalid (the error names the field and value), s is nil, or Dir cannot be
// created.
//
// report.json holds one object: "start", "elapsed_ns", "interval_ns",
// "shard_count", "tick_ns", "interrupted", "samples" (one per interval:
// "at_ns" and "span_ns", the "*_per_sec" rates, "pending", "queued",
// the interval's "cap_hits", "panics", "ticks", "scheduled" and
// "refiled", "refiled_peak" when a pass of the interval set a new peak,
// "slowest_pass" when the interval's slowest pass is known (see
// diagnosis), "tick_lag", "lateness", "pass_time", "pass_task_time" and
// "task_time" as percentiles with "mean_ns", "lost_ns", the time lost
// above the limit, and "process": "sched_latency_max_ns",
// "sched_latency_p99_ns" and "sched_latency_count" (runtime/metrics'
// /sched/latencies:seconds), "gc_cycles", "gc_pause_max_ns",
// "gc_cpu_share", "other_cores", "thread_wait_ns" and "host_known"),
// "diagnosis" (Report.Diagnosis), "spikes" (every interval that was a
// spike, most time lost first: "from_ns" and "to_ns" into the capture,
// "tick_lag_max_ns", "lateness_max_ns", "lateness_p99_ns",
// "pass_time_max_ns", "lost_ns", "causes", some of "tasks", "cpu", "gc",
// "burst", "cascade" and "unknown", and "text", the explanation), "total"
// and "per_shard" (the Stats fields over the capture), and "final"
// (s.Stats() at the end). Durations are integer nanoseconds.
func Capture(ctx context.Context, s *shardwheel.Scheduler, cfg CaptureConfig) (*Report, error) {
	if s == nil {
		return nil, errors.New("profiling: Capture: nil Scheduler")
	}
	cfg, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("profiling: %w", err)
	}
	rep := &Report{
		Dir:         cfg.Dir,
		TextPath:    filepath.Join(cfg.Dir, textFile),
		HTMLPath:    filepath.Join(cfg.Dir, htmlFile),
		JSONPath:    filepath.Join(cfg.Dir, jsonFile),
		ProfilePath: filepath.Join(cfg.Dir, profileFile),
	}

	var errs []error
	stop, err := startProfile(rep.ProfilePath)
	if err != nil {
		errs = append(errs, err)
	}
	var stopTrace func() error
	if cfg.Trace {
		path := filepath.Join(cfg.Dir, traceFile)
		if stopTrace, err = startTrace(path); err != nil {
			errs = append(errs, err)
		} else {
			rep.TracePath = path
		}
	}
	rec := record(ctx, s, cfg)
	rec.trace = rep.TracePath
	for _, stop := range []func() error{stopTrace, stop} {
		if stop != nil {
			if err := stop(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if rec.interrupted {
		errs = append(errs, fmt.Errorf("profiling: capture interrupted after %s: %w", units.Duration(rec.elapsed), ctx.Err()))
	}

	sm := rec.summary()
	var text bytes.Buffer
	_ = sm.write(&text) // a bytes.Buffer does not fail
	rep.Summary = text.String()
	rep.Diagnosis = sm.diagnosis()
	html, err := rec.html(sm, rep.Summary)
	if err != nil {
		errs = append(errs, err)
	}
	js, err := json.MarshalIndent(rec.json(sm), "", "  ")
	if err != nil {
		errs = append(errs, fmt.Errorf("profiling: encode %s: %w", jsonFile, err))
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{rep.TextPath, text.Bytes()}, {rep.HTMLPath, html}, {rep.JSONPath, append(js, '\n')}} {
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("profiling: %w", err))
		}
	}
	return rep, errors.Join(errs...)
}

// startTrace starts an execution trace written to path until stop is
// called.
func startTrace(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("profiling: %w", err)
	}
	if err := trace.Start(f); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("profiling: execution trace: %w", err)
	}
	return func() error {
		trace.Stop()
		if err := f.Close(); err != nil {
			return fmt.Errorf("profiling: %w", err)
		}
		return nil
	}, nil
}

// startProfile starts an fgprof profile written to path when stop is
// called.
func startProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("profiling: %w", err)
	}
	started := time.Now()
	stopProfile := fgprof.Start(f, fgprof.FormatPprof)
	return func() (err error) {
		// fgprof computes the profile's period as 1e9 divided by its
		// sample rate rounded to an integer Hz, and so panics with no
		// samples: run long enough for a few, and recover should its
		// sampler still have been starved, rather than crash the
		// program being profiled.
		time.Sleep(minProfile - time.Since(started))
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("profiling: fgprof: %v", v)
			}
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("profiling: %w", cerr)
			}
		}()
		if err := stopProfile(); err != nil {
			return fmt.Errorf("profiling: write %s: %w", path, err)
		}
		return nil
	}, nil
}

// sample is one interval of a time series: Capture's, or the Handler's
// recent history.
type sample struct {
	At              time.Duration `json:"at_ns"`   // end, since the capture started
	Span            time.Duration `json:"span_ns"` // length
	FiredPerSec     float64       `json:"fired_per_sec"`
	ScheduledPerSec float64       `json:"scheduled_per_sec"`
	CancelledPerSec float64       `json:"cancelled_per_sec"`
	Pending         int           `json:"pending"`
	Queued          int           `json:"queued"`
	CapHits         uint64        `json:"cap_hits"`
	Panics          uint64        `json:"panics"`
	Ticks           uint64        `json:"ticks"`
	Scheduled       uint64        `json:"scheduled"`
	Refiled         uint64        `json:"refiled"`
	// RefiledPeak is the new peak of timers one pass re-filed, if a
	// pass of the interval set one, else 0.
	RefiledPeak int `json:"refiled_peak,omitempty"`
	// SlowestPass is the interval's slowest pass, when the snapshots
	// show it: the slowest pass of the last minute, if it ended within
	// the interval; else nil.
	SlowestPass *stats.Pass `json:"slowest_pass,omitempty"`
	TickLag     dist        `json:"tick_lag"`
	Lateness    dist        `json:"lateness"`
	TaskTime    dist        `json:"task_time"`
	PassTime    dist        `json:"pass_time"`
	// BlockedRuns counts the tasks that held up others for
	// WithBlockedAfter in the interval, and Blocked those still running
	// at its end, the longest first.
	BlockedRuns uint64              `json:"blocked_runs,omitempty"`
	Blocked     []stats.BlockedTask `json:"blocked,omitempty"`
	// Lost is the time lost above the limit (lateLimit): the sum over the
	// interval's timers of how far each ran past it, or, when none did,
	// over its ticks. Spikes are ranked by it.
	Lost time.Duration `json:"lost_ns"`
	// Proc is what the process and the host did meanwhile.
	Proc procDelta `json:"process"`

	end time.Time // the wall-clock end, in the Handler's history
}

// recording is what Capture saw.
type recording struct {
	cfg         CaptureConfig
	shards      int
	tick        time.Duration
	start       time.Time
	elapsed     time.Duration
	interrupted bool // ctx ended before cfg.Duration
	first, last snapshot
	samples     []sample
	trace       string // the execution trace's path, if one was made
}

// record samples s every cfg.Interval for cfg.Duration or until ctx is
// done. Sample times are multiples of the interval from the start, so a
// slow Stats call delays one sample, not all that follow.
func record(ctx context.Context, s *shardwheel.Scheduler, cfg CaptureConfig) *recording {
	r := &recording{cfg: cfg, shards: s.Shards(), tick: s.Tick(), samples: []sample{}}
	r.first = take(s.Stats)
	r.start = r.first.at
	if ctx.Err() != nil { // cancelled before it began: nothing to sample
		r.interrupted, r.last, r.elapsed = true, r.first, time.Since(r.start)
		return r
	}
	prev := r.first
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := time.Duration(1); ; i++ {
		due := min(i*cfg.Interval, cfg.Duration)
		timer.Reset(due - time.Since(r.start))
		select {
		case <-ctx.Done():
			r.interrupted = true
		case <-timer.C:
		}
		cur := take(s.Stats)
		end := r.interrupted || due == cfg.Duration
		// An interval cut short (the last one, or one after a late
		// sample) is merged into the next, or dropped at the end, when
		// it is too short for its rates and percentiles to mean much.
		if cur.at.Sub(prev.at) >= MinInterval/2 {
			r.samples = append(r.samples, newSample(cur, prev, cur.at.Sub(r.start), r.tick))
			prev = cur
		}
		if end {
			r.last, r.elapsed = cur, cur.at.Sub(r.start)
			return r
		}
	}
}

// newSample returns the sample of the interval from prev to cur, which
// ends at (since the capture started), of a scheduler with the given
// tick.
func newSample(cur, prev snapshot, at, tick time.Duration) sample {
	span := cur.at.Sub(prev.at)
	v := newView(cur.st.Total, prev.st.Total)
	sec := span.Seconds()
	s := sample{
		At:              at,
		Span:            span,
		FiredPerSec:     float64(v.Fired) / sec,
		ScheduledPerSec: float64(v.Scheduled) / sec,
		CancelledPerSec: float64(v.Cancelled) / sec,
		Pending:         cur.st.Pending,
		Queued:          v.Queued,
		CapHits:         v.CapHits,
		Panics:          v.Panics,
		Ticks:           v.Ticks,
		Scheduled:       v.Scheduled,
		Refiled:         v.Refiled,
		TickLag:         v.TickLag,
		Lateness:        v.Lateness,
		PassTime:        v.PassTime,
		TaskTime:        v.TaskTime,
		BlockedRuns:     v.BlockedRuns,
		Blocked:         cur.st.Total.Blocked,
		Proc:            procSub(cur.proc, prev.proc, span),
		end:             cur.at,
	}
	limit := lateLimit(tick)
	s.Lost = lostAbove(v.Shard.Lateness, limit)
	if s.Lost == 0 {
		s.Lost = lostAbove(v.Shard.TickLag, limit)
	}
	if cur.st.Total.RefiledPeak > prev.st.Total.RefiledPeak {
		s.RefiledPeak = cur.st.Total.RefiledPeak
	}
	if sp := cur.st.Total.Recent.SlowestPass; sp.Duration > 0 && sp.Ago < span && span <= stats.RecentWindow {
		s.SlowestPass = &sp
	}
	return s
}

// lostAbove returns the sum over the durations of h of how far each
// exceeds limit, each counted at its bucket's middle.
func lostAbove(h stats.Histogram, limit time.Duration) time.Duration {
	var lost time.Duration
	for b := range h.Buckets() {
		if mid := b.Low + (b.High-b.Low)/2; mid > limit {
			lost += time.Duration(b.Count) * (mid - limit)
		}
	}
	return lost
}

// summary returns the text summary of the capture.
func (r *recording) summary() *summary {
	total, shards := views(r.last.st, r.first.st)
	sm := &summary{
		header: []string{
			fmt.Sprintf("shardwheel capture: %d shards, tick %s, %s from %s (%d samples every %s)",
				r.shards, units.Duration(r.tick), units.Duration(r.elapsed), r.start.Format("2006-01-02 15:04:05 MST"),
				len(r.samples), units.Duration(r.cfg.Interval)),
			"Counts and latencies over the capture.",
		},
		tick:    r.tick,
		pending: r.last.st.Pending,
		elapsed: r.elapsed,
		total:   total,
		shards:  shards,

		slowest:      r.last.st.Total.SlowestPass,
		slowestScope: "since the scheduler started",
		host:         procSub(r.last.proc, r.first.proc, r.elapsed),

		intervals:  len(r.samples),
		spikeScope: "of the capture",
		when: func(s *sample) string {
			return "at " + offset(s.At-s.Span) + "-" + offset(s.At) + " into the capture"
		},
	}
	sm.spikes, sm.notes = findSpikes(r.tick, r.samples)
	sm.passWhen = func(ago time.Duration) string {
		if at := r.elapsed - ago; at >= 0 {
			return offset(at) + " into the capture"
		}
		return units.Duration(ago-r.elapsed) + " before the capture"
	}
	if sp := r.last.st.Total.Recent.SlowestPass; sp.Ago < r.elapsed && r.elapsed <= stats.RecentWindow {
		sm.slowest, sm.slowestScope = sp, "of the capture"
	}
	if r.interrupted {
		sm.header = append(sm.header, fmt.Sprintf("Interrupted after %s of %s.", units.Duration(r.elapsed), units.Duration(r.cfg.Duration)))
	}
	return sm
}

// offset formats a time into the capture.
func offset(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return units.Duration(d)
}

// captureJSON is the content of report.json, documented at Capture.
type captureJSON struct {
	Start       time.Time     `json:"start"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Interval    time.Duration `json:"interval_ns"`
	Shards      int           `json:"shard_count"`
	Tick        time.Duration `json:"tick_ns"`
	Interrupted bool          `json:"interrupted"`
	Samples     []sample      `json:"samples"`
	Diagnosis   []string      `json:"diagnosis"`
	Spikes      []spikeJSON   `json:"spikes"`
	Total       view          `json:"total"`
	PerShard    []view        `json:"per_shard"`
	Final       stats.Stats   `json:"final"`
}

// spikeJSON is a spike in report.json.
type spikeJSON struct {
	From        time.Duration `json:"from_ns"`
	To          time.Duration `json:"to_ns"`
	TickLagMax  time.Duration `json:"tick_lag_max_ns"`
	LatenessMax time.Duration `json:"lateness_max_ns"`
	LatenessP99 time.Duration `json:"lateness_p99_ns"`
	PassTimeMax time.Duration `json:"pass_time_max_ns"`
	Lost        time.Duration `json:"lost_ns"`
	Causes      []cause       `json:"causes"`
	Text        string        `json:"text"`
}

// spikesJSON returns spikes as report.json lists them, when giving an
// interval's time.
func spikesJSON(spikes []spike, when func(*sample) string) []spikeJSON {
	out := make([]spikeJSON, len(spikes))
	for i, sp := range spikes {
		s := sp.sample
		out[i] = spikeJSON{
			From: s.At - s.Span, To: s.At,
			TickLagMax: s.TickLag.Max, LatenessMax: s.Lateness.Max, LatenessP99: s.Lateness.P99, PassTimeMax: s.PassTime.Max,
			Lost: s.Lost, Causes: sp.causes, Text: sp.explanation(when),
		}
	}
	return out
}

// json returns the content of report.json, given the capture's summary.
func (r *recording) json(sm *summary) captureJSON {
	return captureJSON{
		Start:       r.start,
		Elapsed:     r.elapsed,
		Interval:    r.cfg.Interval,
		Shards:      r.shards,
		Tick:        r.tick,
		Interrupted: r.interrupted,
		Samples:     r.samples,
		Diagnosis:   sm.diagnosis(),
		Spikes:      spikesJSON(sm.spikes, sm.when),
		Total:       sm.total,
		PerShard:    sm.shards,
		Final:       r.last.st,
	}
}
