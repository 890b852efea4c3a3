// Command bench shows what shardwheel does on this host, side by side
// with what Go programs use today (time.AfterFunc, context.WithTimeout),
// in the same run. Run it with no arguments first:
//
//	go run ./bench
//
// README.md beside this file is the guide: what each command drives and
// measures, how long it takes, and how to read its report.
//
// # Commands
//
//   - compare (the default, about three minutes): a proxy-shaped load
//     (request timeouts, most cancelled by their response; idle timers
//     reset on every read; a million timers resident) against shardwheel
//     (s.AfterFunc, Timer.Cancel, Timer.Reset; -keyed: an Index's
//     AfterFunc, Cancel and Reset), alone and against time.AfterFunc, in one
//     process; then the churn load below (-churn-rounds 0 leaves it out).
//   - churn: the delayed-cancel load the library is judged on. Each of G
//     goroutines schedules a 30s timer and cancels the one it scheduled
//     65,536 iterations earlier, with a million background timers
//     resident and a 5ms probe timer every 8,192 iterations that records
//     how late it runs. time.AfterFunc + Stop, s.AfterFunc + Cancel and
//     s.AfterFunc(ByKey) + Cancel, each run a fresh process (the command
//     re-executed), interleaved in rounds; medians with their ranges.
//   - tune: sweeps shard counts and ticks under the proxy-shaped load and
//     recommends the cheapest that meets a tick-lag target.
//   - lag: profiles shardwheel under the proxy-shaped load.
//   - proxy: a net/http reverse proxy on loopback whose request deadlines
//     come from context.WithTimeout in one run and s.WithTimeout in the
//     other; the backend and clients run in a child process.
//   - burst: a million timers scheduled at once: how late each runs.
//   - rate: the cost of a timer by the rate a program sets them (100 to
//     a million a second): timeouts of 100ms, each cancelled 20ms later,
//     context.WithTimeout against s.WithTimeout and time.AfterFunc
//     against s.AfterFunc, as process CPU per second above a loop that
//     sets none, with the shards' wake-ups per second; rounds alternate.
//   - spike: a spike of timers (1M and 10M by default), all cancelled:
//     the process's heap and the time of a forced collection before it,
//     at its peak and every second after, until both are back near their
//     pre-spike figures, then a second spike's peak; s.AfterFunc,
//     h.AfterFunc and time.AfterFunc, each run a fresh process, with a
//     proxy's steady churn throughout or (-churn=false) idle.
//
// compare, churn, proxy and burst end their text report with a verdict:
// shardwheel's figures as ratios to the baseline's, and which did better
// on each row ("tie" within 5% or where the runs' ranges overlap; "noise"
// where a figure rests on fewer than 1000 samples or 3 GC cycles). spike's
// verdict gives each implementation's share of the spike's heap kept,
// forced GC ratio and come-back side by side, and its table which did
// better on each row. Progress goes to stderr: the phases to come, their
// expected time, and each phase as it starts. The first SIGINT or SIGTERM
// stops a command early: it reports what it measured and exits 130.
//
// # JSON
//
// With -json every command prints one JSON document (and with -out
// writes it beside the text report), of one shape for all:
//
//	{
//	  "command":     "compare" | "churn" | "tune" | "lag" | "proxy" | "burst" | "spike" | "rate",
//	  "host":        {"os", "arch", "cpu", "num_cpu", "gomaxprocs", "go"},
//	  "started":     RFC 3339 time the command started,
//	  "elapsed_ns":  how long it ran,
//	  "config":      what it was asked to do, defaults included,
//	  "results":     what it measured,
//	  "verdict":     {"summary": [lines], "ratios": {key: x}, "winners": {key: name}} or null,
//	  "interrupted": true when a signal cut it short
//	}
//
// Durations are integer nanoseconds, in keys ending in _ns. Per command:
//
//   - compare: config {load, keyed, shards, tick_ns, affinity, churn};
//     results {runs (shardwheel's and time.AfterFunc's Result), load_alone,
//     ratios, churn (as churn's results)}; verdict keys
//     "proxy_load/<metric>", then churn's keys below prefixed "churn/".
//   - churn: config {goroutines, resident, cancel_after, warmup_ns,
//     duration_ns, rounds, ...}; results {runs (one per child process, in
//     the order they ran), summaries (per goroutine count and
//     implementation: figures {key: {median, min, max}}, ratios to
//     time.AfterFunc)}; implementations "afterfunc", "wheel" (s.AfterFunc)
//     and "keyed" (s.AfterFunc with ByKey). Verdict keys: ratios "g<G>/<impl>/<metric>"
//     (impl wheel or keyed; metric cpu_per_pair, heap_objects, gc_cycles);
//     winners "g<G>/<metric>", one for every row of the table that shows
//     a winner, valued by implementation ("wheel", "wheel = keyed",
//     "tie", "noise: <why>", ...).
//   - proxy: config {clients, slow, ..., shards, tick_ns}; results
//     {results (context.WithTimeout's, s.WithTimeout's), ratios}.
//   - burst: config {timers, producers, ...}; results {runs, summaries
//     {impl: {key: {median, min, max}}}}.
//   - spike: config {timers, impls, runs, churn, churn_rate, wait_ns,
//     targets, ...}; results {runs (one per child process, in the order
//     they ran, each with its samples), summaries (per size and
//     implementation: figures {key: {median, min, max}}, came_back_runs,
//     met_target_runs)}; implementations "closure" (s.AfterFunc),
//     "handler" (h.AfterFunc) and "afterfunc" (time.AfterFunc). Verdict
//     ratios "<timers>/<impl>/{kept,gc_ratio,second_growth}" (medians of
//     the runs' own ratios); winners "<timers>/<row key>".
//   - tune: config {load, shards, ticks_ns, repeats, lag_p99_target_ns,
//     lateness_p99_target_ns (when set)}; results
//     {points, recommended, met_target, options}; the verdict's summary
//     is the recommendation and its reasoning.
//   - lag: config {load, shards, tick_ns}; results {result, diagnosis,
//     files, and disturbances with -disturb}; no verdict. lag also keeps
//     its former top-level keys (load, result, diagnosis, files,
//     disturbances) beside the envelope's until its tests read the
//     envelope.
//
// Ratios are shardwheel's figure over the baseline's (time.AfterFunc,
// context.WithTimeout): below 1 is better for costs and latencies, above
// 1 for rates.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130 // as a shell reports death by SIGINT
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command, callable in-process: it parses args, runs
// the command and returns the exit code. The first SIGINT or SIGTERM
// stops the run early and still reports what was measured; a second one
// kills the process as usual.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return runContext(ctx, args, stdout, stderr)
}

// runContext is run with the interruption coming from ctx.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case proxyLoadCmd:
			return runProxyLoad(ctx, args[1:], os.Stdin, stdout, stderr)
		case churnRunCmd:
			return runChurnChild(ctx, args[1:], stdout, stderr)
		case spikeRunCmd:
			return runSpikeChild(ctx, args[1:], stdout, stderr)
		}
	}
	started := time.Now()
	o, err := parseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout, o.cmd)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v; %s\n", err, usageHint(o.cmd))
		return exitUsage
	}
	if err := prepareOut(o); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitError
	}
	if o.procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.procs))
	}
	// A run that fails or is interrupted still has a document: what it
	// measured before.
	doc, err := dispatch(ctx, o, newProgress(stderr))
	if werr := emit(o, doc, started, stdout, stderr); werr != nil && err == nil {
		err = werr
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitError
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "bench: interrupted; the results above are partial")
		return exitInterrupted
	}
	return exitOK
}

// dispatch runs o's command. The document it returns is never nil.
func dispatch(ctx context.Context, o options, p *progress) (document, error) {
	switch o.cmd {
	case "tune":
		return tune(ctx, o, p)
	case "lag":
		return lag(ctx, o, p)
	case "proxy":
		return proxyCompare(ctx, o, p)
	case "burst":
		return burst(ctx, o, p)
	case "churn":
		return churnCommand(ctx, o, p)
	case "spike":
		return spikeCommand(ctx, o, p)
	case "rate":
		return rateCommand(ctx, o, p)
	}
	return compare(ctx, o, p)
}
