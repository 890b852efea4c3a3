// Package profiling shows how late a shardwheel Scheduler's ticks and timers
// are under load, and why.
//
// It has two entry points over the same statistics (Scheduler.Stats):
//
//   - Handler, and Serve which runs it on its own listener, expose the live
//     statistics over HTTP next to the Go profilers: a text page, the stats
//     as JSON, net/http/pprof and a wall-clock fgprof profile.
//   - Capture watches a scheduler for a while and writes a report: text,
//     an HTML page with plots, the time series as JSON, and an fgprof
//     profile of the same period.
//
// # What the numbers mean
//
// Each shard keeps three histograms: tick lag (how late its goroutine
// started a tick it meant to wake for), lateness (how late timers ran after
// the start of their deadline's tick) and task time (run time of one task
// in 16). Counters and histograms only grow; a window is the difference of
// two snapshots (hist.Snapshot.Sub), which is how Capture gets one set of
// percentiles per sampling interval.
//
// Lateness up to one tick is the wheel's resolution. On top of it, a shard
// sleeps until its next tick on a Go timer, and on Linux the runtime wakes
// sleeping threads with millisecond granularity (golang/go#44343): expect
// tick lag and lateness spread over up to about 1ms even on an idle
// machine, half a tick on average at a 1ms tick. Beyond one tick plus that
// 1ms a shard fell behind, and the reports say which of the likely causes
// the counters point to: starved shard goroutines (tick lag), long tasks
// (task time) or the transfer cap.
//
// fgprof is used rather than the CPU profiler because lateness is a
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
// Importing this package imports net/http/pprof, which registers its
// handlers on http.DefaultServeMux as a side effect: a program that serves
// DefaultServeMux on a public address exposes them there too.
package profiling

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"

	"github.com/felixge/fgprof"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/units"
)

// Handler returns an http.Handler serving s's statistics and the Go
// profilers:
//
//	GET /                 a text page: totals, latency percentiles, a
//	                      per-shard table and a diagnosis, since s started
//	GET /stats            s.Stats() as JSON (histograms as percentiles)
//	GET /debug/fgprof     a wall-clock profile; ?seconds=N (default 30)
//	    /debug/pprof/...  the net/http/pprof endpoints and named profiles
//
// Other paths answer 404. The paths are relative to where the handler is
// mounted; under a prefix, strip it:
//
//	mux.Handle("/shardwheel/", http.StripPrefix("/shardwheel", profiling.Handler(s)))
//
// See the package documentation before exposing it beyond loopback. It
// panics if s is nil.
func Handler(s *shardwheel.Scheduler) http.Handler {
	if s == nil {
		panic("profiling: Handler: nil Scheduler")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { servePage(w, s) })
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) { serveStats(w, s) })
	mux.Handle("GET /debug/fgprof", fgprof.Handler())
	// pprof.Index serves the named profiles (heap, goroutine, ...) too.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// servePage writes the text page.
func servePage(w http.ResponseWriter, s *shardwheel.Scheduler) {
	st := s.Stats()
	total, shards := views(st, shardwheel.Stats{})
	sm := summary{
		header: []string{
			fmt.Sprintf("shardwheel: %d shards, tick %s, %d pending", s.Shards(), units.Duration(s.Tick()), st.Pending),
			"Counts and latencies since the scheduler started. Also: /stats (JSON), /debug/pprof/, /debug/fgprof?seconds=10",
		},
		tick:    s.Tick(),
		pending: st.Pending,
		total:   total,
		shards:  shards,
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = sm.write(w) // a write error means the client went away
}

// serveStats writes s.Stats() as JSON.
func serveStats(w http.ResponseWriter, s *shardwheel.Scheduler) {
	b, err := json.MarshalIndent(s.Stats(), "", "  ")
	if err != nil {
		http.Error(w, "profiling: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}
