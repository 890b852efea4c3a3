// Package profiling shows how late a shardwheel Scheduler's ticks and timers
// are under load, and why.
//
// It has two entry points over the same statistics (Scheduler.Stats):
//
//   - Handler, and Serve which runs it on its own listener, expose the live
//     statistics over HTTP next to the Go profilers: a page (HTML for
//     browsers, text otherwise) with the last few seconds beside the
//     totals, the same as JSON, the runtime/pprof profiles and an
//     execution trace, a wall-clock fgprof profile, and the caller's
//     /metrics handler if given one (HandlerWith, ServeWith).
//   - Capture watches a scheduler for a while and writes a report: text,
//     an HTML page with plots, the time series as JSON, and an fgprof
//     profile of the same period.
//
// # What the numbers mean
//
// Each shard keeps four histograms: tick lag (how late its goroutine
// started a tick it meant to wake for), lateness (how late tasks started
// after the start of their deadline's tick, measured as their runner starts
// them), pass time (how long each of its passes took; no task runs in a
// pass) and task time (how long each task ran). Counters and histograms
// only grow; a window is the difference of two snapshots (Stats.Sub),
// which is how the Handler reports the last seconds and Capture gets one
// set of percentiles per sampling interval.
// The slowest pass and the peaks are given since the scheduler started
// and for the last minute (stats.Shard.Recent).
//
// Lateness up to one tick is the wheel's resolution. On top of it, a shard
// sleeps until its next tick on a Go timer, and on Linux the runtime wakes
// sleeping threads with millisecond granularity (golang/go#44343): expect
// tick lag and lateness spread over up to about 1ms even on an idle
// machine, half a tick on average at a 1ms tick. Beyond one tick plus that
// 1ms (the limit) a shard fell behind.
//
// # Spikes and their causes
//
// An interval of the time series is a spike when its p99 tick lag or
// lateness is over the limit (a p99 of 100 values or more: that of fewer
// is their maximum), or when any tick or timer in it is over the limit
// plus 20ms (the incident limit): a goroutine made runnable while
// every P runs a busy one waits until one is preempted, which Go does
// after 10ms and notices up to 10ms later, so lone waits of up to about
// 20ms are routine on a busy process. Other intervals over the limit are
// counted as routine jitter, not listed. Spikes are ranked by the time
// lost above the limit: the sum over the interval's timers of how far
// each ran past it.
//
// For each spike the diagnosis says what the figures of its interval
// point to, and names no cause they do not show:
//
//   - waiting behind a task, when the shards started their ticks on time
//     (tick lag under half the lateness) and tasks ran late: behind a task
//     that blocked, which Stats names (its key's later timers wait for it;
//     the tasks of other keys move on after WithBlockedAfter), or behind
//     a task timed as long as half the delay (every task is timed): keep
//     tasks short or use WithExecutor. When the host kept this process's
//     threads waiting half the interval or more, waiting for a CPU is
//     named second: wall-clock time cannot tell a task that blocked from
//     one whose thread lost its CPU;
//   - waiting for a CPU, when the shards' goroutines were runnable and not
//     running: the runtime's scheduling latencies
//     (/sched/latencies:seconds, a sample of one scheduling in 8 or so,
//     which rarely holds the shard goroutine's own wait) show goroutines
//     waiting for a P a quarter as long as the delay, or this process's
//     threads waited
//     half as long in all on the OS's run queues (Linux), with how busy
//     other processes kept the host;
//   - garbage collection, when the GC stopped the world half as long, or took
//     a quarter of the CPU (its target while marking; assists take more)
//     while goroutines waited for a P a quarter as long or more, or while
//     tasks that allocate ran long. The runtime counts a GC cycle's CPU
//     when the cycle ends: the first interval of GC pressure may read as
//     waiting for a CPU (busy goroutines and GC workers), or as waiting
//     behind a task when tasks that allocate assist the GC;
//   - a cascade, when the interval's slowest pass (known when it was the
//     slowest of the last minute and ended in the interval) or a new peak
//     re-filed enough timers to take half the delay at 200ns each;
//   - a burst, when ticks reached the transfer cap, or one pass took in
//     that many new timers;
//   - unknown otherwise, with what the figures do show.
//
// Shorter stalls of the same interval, over the limit and a quarter as
// long as its worst or more, are named after it: a pass whose timer moves
// took most of its time. A stall that straddles two intervals makes timers
// late in the second, whose own passes may be short: when the interval
// before is a spike with a pass half as long as the second's worst delay,
// or a task that blocked while the second's shards were on time (or, when
// nothing in the second shows a cause, any figure that long), the second
// is named the tail of that stall, with its causes.
//
// fgprof is offered beside the CPU profiler because lateness is a
// wall-clock problem: a shard that waits (for a CPU, a lock, a blocking
// task) is invisible to an on-CPU profile.
//
// # Security
//
// The endpoints reveal the program's command line, stacks and memory
// contents, and a profile request costs CPU for its duration. Serve
// therefore binds DefaultAddr, a loopback address, unless the caller names
// another address: exposing them beyond the host must be a deliberate
// choice, behind the caller's own authentication.
//
// Importing this package registers nothing: it serves the profilers from
// its own handler, with runtime/pprof and runtime/trace, and does not
// import net/http/pprof, whose import registers its handlers on
// http.DefaultServeMux. A program that wants the profilers on a mux of its
// own mounts the Handler there (see Handler).
package profiling

import (
	"net/http"
	"time"

	"github.com/felixge/fgprof"

	"github.com/shardwheel/shardwheel"
)

// Options configures HandlerWith and ServeWith. The zero value gives
// what Handler and Serve serve.
type Options struct {
	// Metrics, if not nil, serves /metrics (every method; the handler
	// decides), and the page links to it: a Prometheus exporter of the
	// scheduler's Stats, such as promhttp.Handler() with a collector
	// registered. This package does not depend on any metrics library.
	Metrics http.Handler
}

// Handler returns an http.Handler serving s's statistics and the Go
// profilers; it is HandlerWith(s, Options{}). See HandlerWith for the
// paths. It panics if s is nil.
func Handler(s *shardwheel.Scheduler) http.Handler {
	if s == nil {
		panic("profiling: Handler: nil Scheduler")
	}
	return newHandler(s, withClock(Options{}, time.Now))
}

// HandlerWith returns an http.Handler serving s's statistics, the Go
// profilers, and what opts adds:
//
//	GET /                   the live page: the last ?window= (default
//	                        DefaultWindow) beside the totals since s
//	                        started, with a diagnosis. HTML with charts
//	                        of the last MaxWindow, reloading itself every
//	                        ?refresh= (default 5s; 0 stops it), when the
//	                        Accept header prefers text/html, as browsers'
//	                        does; plain text otherwise (curl)
//	GET /stats              the same window and totals as JSON; takes
//	                        ?window= too
//	GET /metrics            opts.Metrics, if set (any method)
//	GET /debug/fgprof       a wall-clock profile; ?seconds=N, whole
//	                        seconds (default 30)
//	GET /debug/pprof/       an index of the profiles below
//	GET /debug/pprof/profile  a CPU profile; ?seconds=N (default 30)
//	GET /debug/pprof/trace  an execution trace; ?seconds=N (default 1)
//	GET /debug/pprof/NAME   a runtime/pprof profile: heap, allocs,
//	                        goroutine, block, mutex, threadcreate;
//	                        ?debug=1 for text (goroutine: 2 for stacks as
//	                        in a panic), ?gc=1 (heap) to collect garbage
//	                        first, ?seconds=N for the difference over N
//	                        seconds
//	GET /debug/pprof/cmdline  the command line, NUL-separated
//	GET, POST /debug/pprof/symbol  program counters to function names
//
// The /debug/pprof/ paths, parameters and formats are net/http/pprof's,
// so go tool pprof and go tool trace fetch from them as they would from
// it, with one difference: a malformed or out-of-range parameter (seconds
// must be a positive number up to 3600, debug and gc integers) gets 400
// Bad Request with the reason, where net/http/pprof falls back to the
// default. A CPU profile or trace cut short by the request's end (the
// client leaving, or Server.Close) covers the time until then. Other
// paths answer 404 Not Found, and methods other than those listed 405
// Method Not Allowed (HEAD goes with GET).
//
// # The window
//
// ?window= is a Go duration from MinWindow to MaxWindow (10s, 90s, 2m30s);
// any other value, or the parameter given twice, gets 400 Bad Request
// with the reason. ?refresh= is checked likewise: 0, or a duration from
// 1s to 1h, rounded to the second.
//
// The handler starts no goroutine. Each request to / or /stats takes a
// snapshot (Scheduler.Stats) and keeps it if the newest kept one is at
// least 1s older; the window starts at the kept snapshot whose age is
// nearest the length asked for. Kept snapshots thin out with age, so
// that, while requests keep coming, a window is within a quarter of the
// length asked for, 1s, or the time between requests, whichever is most:
// the HTML page's reloads see to that while it is open. A window is
// therefore only as recent as the requests: the first request's spans
// back to the handler's creation, and the first after a pause to the
// last request before it. The page and /stats say how long the window
// they report is (window_ns in JSON). The page's charts show one point
// per interval between kept snapshots, for the last MaxWindow.
//
// This costs a Stats call per request, and memory for the kept
// snapshots: at most 24, each about 47 KB per shard plus 47 KB for the
// total and 5 KB of the runtime's readings (for 2 shards, at most 3.5 MB;
// for 16, 19 MB), and up to about 150 KB of chart history. After
// MaxWindow and a quarter without requests, a timer (time.AfterFunc, not
// a goroutine) drops all but the newest snapshot.
//
// # /stats
//
// /stats serves one JSON object:
//
//	{
//	  "time": "2006-01-02T15:04:05.999999999Z", // when the snapshot was taken
//	  "window_ns": 10004000000,                 // the window's actual length
//	  "requested_window_ns": 10000000000,       // ?window=, or DefaultWindow
//	  "window": { ... },        // s.Stats().Sub(the snapshot at the window's start)
//	  "since_start": { ... }    // s.Stats()
//	}
//
// "window" and "since_start" have the shape of stats.Stats:
// "pending", "total" and "shards", histograms as percentiles with
// "mean_ns" and "count", durations in integer nanoseconds. In "window",
// counts and histograms cover the window, while levels and peaks
// (resident, queued, the peaks, slowest_pass) are the current ones, as
// Stats.Sub documents.
//
// # Mounting
//
// The paths are relative to where the handler is mounted; under a
// prefix, strip it, and mount the prefix with its trailing slash:
//
//	mux.Handle("/shardwheel/", http.StripPrefix("/shardwheel", profiling.Handler(s)))
//
// The page's links are relative, so they work there too. See the package
// documentation before exposing it beyond loopback. HandlerWith panics if
// s is nil.
func HandlerWith(s *shardwheel.Scheduler, opts Options) http.Handler {
	if s == nil {
		panic("profiling: HandlerWith: nil Scheduler")
	}
	return newHandler(s, withClock(opts, time.Now))
}

// opts is Options with what tests inject.
type opts struct {
	Options
	now func() time.Time
}

// withClock returns o with the clock now.
func withClock(o Options, now func() time.Time) opts { return opts{Options: o, now: now} }

// handler serves HandlerWith's paths.
type handler struct {
	mux     *http.ServeMux
	s       *shardwheel.Scheduler
	metrics bool
	recent  *recent
}

// newHandler returns the handler of s with o.
func newHandler(s *shardwheel.Scheduler, o opts) *handler {
	h := &handler{mux: http.NewServeMux(), s: s, metrics: o.Metrics != nil, recent: newRecent(s.Stats, s.Tick(), o.now)}
	h.mux.HandleFunc("GET /{$}", h.servePage)
	h.mux.HandleFunc("GET /stats", h.serveStats)
	h.mux.Handle("GET /debug/fgprof", fgprof.Handler())
	mountPprof(h.mux)
	if o.Metrics != nil {
		h.mux.Handle("/metrics", o.Metrics)
	}
	return h
}

// ServeHTTP serves r from the handler's paths.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }
