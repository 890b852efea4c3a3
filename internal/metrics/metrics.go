// Package metrics describes the metrics that shardwheel's exporters
// publish from Scheduler.Stats: the Prometheus collector (module
// github.com/shardwheel/shardwheel/prometheus) and the OpenTelemetry
// instrumentation (module github.com/shardwheel/shardwheel/otel). Both
// walk the tables here, so that exporting a new stats.Shard field is one
// line in Shard, and TestEveryShardFieldIsExported fails until that
// line exists.
//
// The exporters live in modules of their own so that a program that uses
// neither never downloads client_golang or OpenTelemetry; they import this
// package across the module boundary, which Go allows because they sit
// under the same path prefix (gopls does the same with x/tools/internal).
// The price is that an exporter compiles only against a core version whose
// internal/metrics has the API it uses: change this package's API only
// together with both exporters, and release them with a matching require.
package metrics

import (
	"time"

	"github.com/shardwheel/shardwheel/stats"
)

// Kind is how a metric's value behaves over time and across shards, which
// decides its instrument in each exporter.
type Kind uint8

const (
	// Counter is a count since New that never decreases: a Prometheus
	// counter, an OpenTelemetry observable counter. Sum it over shards.
	Counter Kind = iota + 1
	// Level is an amount held right now that adds up across shards
	// (timers resident, queued): a Prometheus gauge, an OpenTelemetry
	// observable up-down counter, whose sum over shards is meaningful.
	Level
	// Gauge is a value that does not add up across shards (a peak, the
	// last transfer, the slowest pass): a Prometheus gauge, an
	// OpenTelemetry observable gauge. Take its max over shards.
	Gauge
	// Distribution is a Histogram of durations: a Prometheus histogram,
	// an OpenTelemetry exponential histogram (through the SDK producer)
	// or a summary of count, sum and quantiles (through the API).
	Distribution
)

// Stats is stats.Shard, named short for the table.
type Stats = stats.Shard

// Metric describes a metric exported from one shard's statistics, with
// the label (attribute) shard set to the shard's index.
type Metric struct {
	// Field is the stats.Shard field the metric reads, as a selector path
	// ("SlowestPass.Duration"). The tests check that every field is
	// some Metric's and that the accessor reads exactly that field.
	Field string
	// Prom is the Prometheus name after the "shardwheel_" prefix, with
	// its unit suffix (_seconds) and, for a counter, _total.
	Prom string
	// OTel is the OpenTelemetry instrument name, by the semantic
	// conventions' style: dotted namespaces under "shardwheel", no
	// unit and no _total in the name.
	OTel string
	// Kind decides the instrument.
	Kind Kind
	// Unit is the UCUM unit: "s" for a duration, or an annotation such
	// as "{timer}" naming what a count counts.
	Unit string
	// Help is the description both exporters publish: one sentence that
	// says what is measured, unit and kind being shown by the exporter.
	Help string
	// Int reads a count (Counter, Level or Gauge); Seconds reads a
	// duration Gauge; Hist reads a Distribution. Exactly one is set.
	Int     func(Stats) int64
	Seconds func(Stats) time.Duration
	Hist    func(Stats) stats.Histogram
	// Samples is the UCUM annotation of what a Distribution counts: its
	// count's unit.
	Samples string
}

// NotExported lists the stats.Shard fields no exporter publishes, with the
// reason.
var NotExported = map[string]string{
	"SlowestPass.Ago":        "a time since an event, which grows between collections: a backend sees when the slowest pass changed from its gauge",
	"Recent.SlowestPass.Ago": "as SlowestPass.Ago",
	"LongestBlocked.Key":     "a label of unbounded cardinality: Stats and the profiling page name the task",
	"LongestBlocked.Keyed":   "as LongestBlocked.Key",
	"LongestBlocked.Func":    "as LongestBlocked.Key",
}

// Shard is the table of per-shard metrics. Counters are uint64 in
// stats.Shard and int64 here: they would need 292 years at a billion a
// second to tell the difference.
var Shard = []Metric{
	{Field: "Resident", Prom: "resident_timers", OTel: "shardwheel.timer.resident", Kind: Level, Unit: "{timer}", Help: "Timer nodes the shard holds: its timers not yet ended (in its wheel, its queue or handed to another shard), ended ones not yet freed, and nodes standing in for timers other shards handed to it.", Int: func(s Stats) int64 { return int64(s.Resident) }},
	{Field: "Scheduled", Prom: "timers_scheduled_total", OTel: "shardwheel.timer.scheduled", Kind: Counter, Unit: "{timer}", Help: "Timers accepted by AfterFunc and its kin.", Int: func(s Stats) int64 { return int64(s.Scheduled) }},
	{Field: "Fired", Prom: "timers_fired_total", OTel: "shardwheel.timer.fired", Kind: Counter, Unit: "{timer}", Help: "Timers fired: their tasks handed to the shard's runner.", Int: func(s Stats) int64 { return int64(s.Fired) }},
	{Field: "Cancelled", Prom: "timers_cancelled_total", OTel: "shardwheel.timer.cancelled", Kind: Counter, Unit: "{timer}", Help: "Cancel calls that returned true, an Index's Cancel and the timers its calls replaced included.", Int: func(s Stats) int64 { return int64(s.Cancelled) }},
	{Field: "TakenBack", Prom: "timers_taken_back_total", OTel: "shardwheel.timer.taken_back", Kind: Counter, Unit: "{timer}", Help: "Cancelled timers whose node the cancelling call freed itself, before the shard saw them (a subset of cancelled).", Int: func(s Stats) int64 { return int64(s.TakenBack) }},
	{Field: "Reset", Prom: "timer_resets_total", OTel: "shardwheel.timer.resets", Kind: Counter, Unit: "{reset}", Help: "Successful Reset calls.", Int: func(s Stats) int64 { return int64(s.Reset) }},
	{Field: "Stopped", Prom: "timers_stopped_total", OTel: "shardwheel.timer.stopped", Kind: Counter, Unit: "{timer}", Help: "Timers claimed by Stop, which never ran.", Int: func(s Stats) int64 { return int64(s.Stopped) }},
	{Field: "Queued", Prom: "queued_timers", OTel: "shardwheel.queue.depth", Kind: Level, Unit: "{timer}", Help: "New timers waiting in the shard's queue for the wheel.", Int: func(s Stats) int64 { return int64(s.Queued) }},
	{Field: "QueuedPeak", Prom: "queued_peak_timers", OTel: "shardwheel.queue.peak_depth", Kind: Gauge, Unit: "{timer}", Help: "The most new timers a pass has found in the shard's queue.", Int: func(s Stats) int64 { return int64(s.QueuedPeak) }},
	{Field: "TransferLast", Prom: "transfer_last_timers", OTel: "shardwheel.transfer.last", Kind: Gauge, Unit: "{timer}", Help: "Timers moved from the queue to the wheel during the last tick that moved any.", Int: func(s Stats) int64 { return int64(s.TransferLast) }},
	{Field: "TransferPeak", Prom: "transfer_peak_timers", OTel: "shardwheel.transfer.peak", Kind: Gauge, Unit: "{timer}", Help: "The most timers moved from the queue to the wheel in one tick.", Int: func(s Stats) int64 { return int64(s.TransferPeak) }},
	{Field: "CapHits", Prom: "transfer_cap_hits_total", OTel: "shardwheel.transfer.cap_hits", Kind: Counter, Unit: "{tick}", Help: "Ticks whose transfer from the queue reached the cap (WithTransferCap).", Int: func(s Stats) int64 { return int64(s.CapHits) }},
	{Field: "Ticks", Prom: "tick_passes_total", OTel: "shardwheel.tick.passes", Kind: Counter, Unit: "{pass}", Help: "Passes that processed at least one new tick.", Int: func(s Stats) int64 { return int64(s.Ticks) }},
	{Field: "TicksSkipped", Prom: "ticks_skipped_total", OTel: "shardwheel.tick.skipped", Kind: Counter, Unit: "{tick}", Help: "Ticks the shard slept through because nothing was due.", Int: func(s Stats) int64 { return int64(s.TicksSkipped) }},
	{Field: "Wakeups", Prom: "wakeups_total", OTel: "shardwheel.wakeups", Kind: Counter, Unit: "{wakeup}", Help: "Times the shard goroutine woke from a sleep: for a tick it planned (a timer due, cancelled since or not, a cascade, housekeeping), for a timer filed due earlier, or for a Stats reader.", Int: func(s Stats) int64 { return int64(s.Wakeups) }},
	{Field: "Refiled", Prom: "timers_refiled_total", OTel: "shardwheel.timer.refiled", Kind: Counter, Unit: "{timer}", Help: "Timers moved within the wheel: cascades from a higher level, and Resets found at their old slot.", Int: func(s Stats) int64 { return int64(s.Refiled) }},
	{Field: "RefiledPeak", Prom: "refiled_peak_timers", OTel: "shardwheel.pass.peak_refiled", Kind: Gauge, Unit: "{timer}", Help: "The most timers one pass moved within the wheel.", Int: func(s Stats) int64 { return int64(s.RefiledPeak) }},
	{Field: "HeldCancelled", Prom: "held_cancelled_timers", OTel: "shardwheel.timer.held_cancelled", Kind: Level, Unit: "{timer}", Help: "Cancelled timers whose nodes are still in the wheel, until their slot comes round or the sweep frees them.", Int: func(s Stats) int64 { return int64(s.HeldCancelled) }},
	{Field: "Sweeps", Prom: "sweeps_total", OTel: "shardwheel.sweep.completed", Kind: Counter, Unit: "{sweep}", Help: "Completed sweeps of the shard's nodes.", Int: func(s Stats) int64 { return int64(s.Sweeps) }},
	{Field: "Swept", Prom: "swept_timers_total", OTel: "shardwheel.sweep.freed", Kind: Counter, Unit: "{timer}", Help: "Cancelled timer nodes freed by sweeps.", Int: func(s Stats) int64 { return int64(s.Swept) }},
	{Field: "SlowestPass.Duration", Prom: "slowest_pass_seconds", OTel: "shardwheel.pass.slowest.duration", Kind: Gauge, Unit: "s", Help: "How long the shard's slowest pass took (0 with WithStats(false)).", Seconds: func(s Stats) time.Duration { return s.SlowestPass.Duration }},
	{Field: "SlowestPass.Transferred", Prom: "slowest_pass_transferred_timers", OTel: "shardwheel.pass.slowest.transferred", Kind: Gauge, Unit: "{timer}", Help: "New timers the shard's slowest pass moved from the queue into the wheel.", Int: func(s Stats) int64 { return int64(s.SlowestPass.Transferred) }},
	{Field: "SlowestPass.Refiled", Prom: "slowest_pass_refiled_timers", OTel: "shardwheel.pass.slowest.refiled", Kind: Gauge, Unit: "{timer}", Help: "Timers the shard's slowest pass moved within the wheel.", Int: func(s Stats) int64 { return int64(s.SlowestPass.Refiled) }},
	{Field: "SlowestPass.Cascaded", Prom: "slowest_pass_cascaded_timers", OTel: "shardwheel.pass.slowest.cascaded", Kind: Gauge, Unit: "{timer}", Help: "Timers the shard's slowest pass moved down the wheel in cascades (part of the refiled ones).", Int: func(s Stats) int64 { return int64(s.SlowestPass.Cascaded) }},
	{Field: "SlowestPass.Fired", Prom: "slowest_pass_fired_timers", OTel: "shardwheel.pass.slowest.fired", Kind: Gauge, Unit: "{timer}", Help: "Tasks the shard's slowest pass handed to the runner.", Int: func(s Stats) int64 { return int64(s.SlowestPass.Fired) }},
	{Field: "Recent.SlowestPass.Duration", Prom: "recent_slowest_pass_seconds", OTel: "shardwheel.pass.recent_slowest.duration", Kind: Gauge, Unit: "s", Help: "How long the shard's slowest pass of the last minute took (0 with WithStats(false)).", Seconds: func(s Stats) time.Duration { return s.Recent.SlowestPass.Duration }},
	{Field: "Recent.SlowestPass.Transferred", Prom: "recent_slowest_pass_transferred_timers", OTel: "shardwheel.pass.recent_slowest.transferred", Kind: Gauge, Unit: "{timer}", Help: "New timers the shard's slowest pass of the last minute moved from the queue into the wheel.", Int: func(s Stats) int64 { return int64(s.Recent.SlowestPass.Transferred) }},
	{Field: "Recent.SlowestPass.Refiled", Prom: "recent_slowest_pass_refiled_timers", OTel: "shardwheel.pass.recent_slowest.refiled", Kind: Gauge, Unit: "{timer}", Help: "Timers the shard's slowest pass of the last minute moved within the wheel.", Int: func(s Stats) int64 { return int64(s.Recent.SlowestPass.Refiled) }},
	{Field: "Recent.SlowestPass.Cascaded", Prom: "recent_slowest_pass_cascaded_timers", OTel: "shardwheel.pass.recent_slowest.cascaded", Kind: Gauge, Unit: "{timer}", Help: "Timers the shard's slowest pass of the last minute moved down the wheel in cascades (part of the refiled ones).", Int: func(s Stats) int64 { return int64(s.Recent.SlowestPass.Cascaded) }},
	{Field: "Recent.SlowestPass.Fired", Prom: "recent_slowest_pass_fired_timers", OTel: "shardwheel.pass.recent_slowest.fired", Kind: Gauge, Unit: "{timer}", Help: "Tasks the shard's slowest pass of the last minute handed to the runner.", Int: func(s Stats) int64 { return int64(s.Recent.SlowestPass.Fired) }},
	{Field: "Recent.QueuedPeak", Prom: "recent_queued_peak_timers", OTel: "shardwheel.queue.recent_peak_depth", Kind: Gauge, Unit: "{timer}", Help: "The most new timers a pass of the last minute found in the shard's queue.", Int: func(s Stats) int64 { return int64(s.Recent.QueuedPeak) }},
	{Field: "Recent.TransferPeak", Prom: "recent_transfer_peak_timers", OTel: "shardwheel.transfer.recent_peak", Kind: Gauge, Unit: "{timer}", Help: "The most timers moved from the queue to the wheel in one tick of the last minute, as its passes left the count.", Int: func(s Stats) int64 { return int64(s.Recent.TransferPeak) }},
	{Field: "Recent.RefiledPeak", Prom: "recent_refiled_peak_timers", OTel: "shardwheel.pass.recent_peak_refiled", Kind: Gauge, Unit: "{timer}", Help: "The most timers one pass of the last minute moved within the wheel.", Int: func(s Stats) int64 { return int64(s.Recent.RefiledPeak) }},
	{Field: "Panics", Prom: "task_panics_total", OTel: "shardwheel.task.panics", Kind: Counter, Unit: "{panic}", Help: "Tasks that panicked or called runtime.Goexit.", Int: func(s Stats) int64 { return int64(s.Panics) }},
	{Field: "PeriodicRuns", Prom: "periodic_runs_total", OTel: "shardwheel.periodic.runs", Kind: Counter, Unit: "{run}", Help: "Runs of periodic timers' tasks (Every), which timers fired does not count.", Int: func(s Stats) int64 { return int64(s.PeriodicRuns) }},
	{Field: "PeriodicMissed", Prom: "periodic_missed_total", OTel: "shardwheel.periodic.missed", Kind: Counter, Unit: "{point}", Help: "Grid points periodic timers missed because their series was behind.", Int: func(s Stats) int64 { return int64(s.PeriodicMissed) }},
	{Field: "Crossed", Prom: "timers_crossed_total", OTel: "shardwheel.timer.crossed", Kind: Counter, Unit: "{timer}", Help: "Timers with a key this shard filed and handed over, near their deadline, to the shard their key routes to.", Int: func(s Stats) int64 { return int64(s.Crossed) }},
	{Field: "NodesAllocated", Prom: "nodes_allocated", OTel: "shardwheel.nodes.allocated", Kind: Level, Unit: "{node}", Help: "Timer nodes the shard's storage holds, in use or free.", Int: func(s Stats) int64 { return int64(s.NodesAllocated) }},
	{Field: "NodesReleased", Prom: "nodes_released_total", OTel: "shardwheel.nodes.released", Kind: Counter, Unit: "{node}", Help: "Timer nodes the shard gave back to the garbage collector after spikes.", Int: func(s Stats) int64 { return int64(s.NodesReleased) }},
	{Field: "BlocksReleased", Prom: "blocks_released_total", OTel: "shardwheel.blocks.released", Kind: Counter, Unit: "{block}", Help: "Blocks of timer nodes the shard gave back after spikes.", Int: func(s Stats) int64 { return int64(s.BlocksReleased) }},
	{Field: "BlocksRemade", Prom: "blocks_remade_total", OTel: "shardwheel.blocks.remade", Kind: Counter, Unit: "{block}", Help: "Released blocks of timer nodes a later burst made again.", Int: func(s Stats) int64 { return int64(s.BlocksRemade) }},
	{Field: "BlockedRuns", Prom: "blocked_runs_total", OTel: "shardwheel.task.blocked_runs", Kind: Counter, Unit: "{task}", Help: "Tasks that held up the tasks behind them past WithBlockedAfter, which went on on another runner.", Int: func(s Stats) int64 { return int64(s.BlockedRuns) }},
	{Field: "BlockedRefused", Prom: "blocked_refused_total", OTel: "shardwheel.task.blocked_refused", Kind: Counter, Unit: "{look}", Help: "Looks at a blocked task the WithMaxBlockedTasks bound refused, one every WithBlockedAfter while tasks wait behind it.", Int: func(s Stats) int64 { return int64(s.BlockedRefused) }},
	{Field: "LongestBlocked.Running", Prom: "longest_blocked_task_seconds", OTel: "shardwheel.task.longest_blocked", Kind: Gauge, Unit: "s", Help: "How long the longest blocked task ran, or has run if it has not returned (0 if none).", Seconds: func(s Stats) time.Duration { return s.LongestBlocked.Running }},
	{Field: "Blocked", Prom: "blocked_tasks", OTel: "shardwheel.task.blocked", Kind: Level, Unit: "{task}", Help: "Blocked tasks that have not returned.", Int: func(s Stats) int64 { return int64(len(s.Blocked)) }},
	{Field: "TickLag", Prom: "tick_lag_seconds", OTel: "shardwheel.tick.lag", Kind: Distribution, Unit: "s", Samples: "{tick}", Help: "How late the shard started processing a tick it had planned to wake for.", Hist: func(s Stats) stats.Histogram { return s.TickLag }},
	{Field: "Lateness", Prom: "task_lateness_seconds", OTel: "shardwheel.task.lateness", Kind: Distribution, Unit: "s", Samples: "{task}", Help: "How late tasks started versus their deadline rounded up to the tick grid.", Hist: func(s Stats) stats.Histogram { return s.Lateness }},
	{Field: "PassTime", Prom: "pass_duration_seconds", OTel: "shardwheel.pass.duration", Kind: Distribution, Unit: "s", Samples: "{pass}", Help: "How long each pass of the shard took.", Hist: func(s Stats) stats.Histogram { return s.PassTime }},
	{Field: "TaskTime", Prom: "task_duration_seconds", OTel: "shardwheel.task.duration", Kind: Distribution, Unit: "s", Samples: "{task}", Help: "Run time of each task (or of the executor's run call for it).", Hist: func(s Stats) stats.Histogram { return s.TaskTime }},
}

// SchedulerMetric describes a metric of the whole Scheduler, exported
// without a shard label.
type SchedulerMetric struct {
	// Field, Prom, OTel, Kind, Unit and Help are as in Metric.
	Field, Prom, OTel string
	Kind              Kind
	Unit, Help        string
	// Int reads the value.
	Int func(stats.Stats) int64
}

// Scheduler is the table of whole-Scheduler metrics. Stats.Total is not
// exported beside the shards' series: it is their sum (or, for peaks, the
// max), which every backend computes, and exporting it too would double
// every sum over the shard label. The exporters' WithTotalOnly exports it
// instead of them, through the Shard table without the label.
var Scheduler = []SchedulerMetric{
	{Field: "Pending", Prom: "pending_timers", OTel: "shardwheel.timer.pending", Kind: Level, Unit: "{timer}", Help: "Timers scheduled and not yet fired, cancelled or stopped (Scheduler.Pending).", Int: func(s stats.Stats) int64 { return int64(s.Pending) }},
}
