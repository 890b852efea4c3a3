// Package shardwheelotel reports a shardwheel.Scheduler's statistics
// through the OpenTelemetry metrics API: observable instruments with one
// callback that takes one Scheduler.Stats snapshot per collection.
//
//	s, _ := shardwheel.New()
//	reg, err := shardwheelotel.Register(s, otel.Meter(shardwheelotel.ScopeName))
//	...
//	defer reg.Unregister()
//
// It lives in a module of its own, so that a program that imports
// shardwheel without it never downloads OpenTelemetry. It needs only the
// API; the subpackage shardwheelsdk (go.opentelemetry.io/otel/sdk users)
// adds the distributions as real histograms.
//
// # Instruments
//
// Every instrument but shardwheel.timer.pending has the attribute shard,
// the shard's index (an int). Stats.Total is not reported then: sum the
// counters and up-down counters over shards, take the max of the gauges
// (peaks, the last transfer, the slowest pass), which do not add up.
// Reporting the total too would double every such sum. WithTotalOnly
// reports Stats.Total instead, without the attribute: the number of
// points then does not grow with the shards.
//
//	stats.Shard field              instrument                                 kind                          unit
//	Pending (Stats)                shardwheel.timer.pending                   Int64ObservableUpDownCounter  {timer}
//	Resident                       shardwheel.timer.resident                  Int64ObservableUpDownCounter  {timer}
//	Scheduled                      shardwheel.timer.scheduled                 Int64ObservableCounter        {timer}
//	Fired                          shardwheel.timer.fired                     Int64ObservableCounter        {timer}
//	Cancelled                      shardwheel.timer.cancelled                 Int64ObservableCounter        {timer}
//	TakenBack                      shardwheel.timer.taken_back                Int64ObservableCounter        {timer}
//	Reset                          shardwheel.timer.resets                    Int64ObservableCounter        {reset}
//	Stopped                        shardwheel.timer.stopped                   Int64ObservableCounter        {timer}
//	Queued                         shardwheel.queue.depth                     Int64ObservableUpDownCounter  {timer}
//	QueuedPeak                     shardwheel.queue.peak_depth                Int64ObservableGauge          {timer}
//	TransferLast                   shardwheel.transfer.last                   Int64ObservableGauge          {timer}
//	TransferPeak                   shardwheel.transfer.peak                   Int64ObservableGauge          {timer}
//	CapHits                        shardwheel.transfer.cap_hits               Int64ObservableCounter        {tick}
//	Ticks                          shardwheel.tick.passes                     Int64ObservableCounter        {pass}
//	TicksSkipped                   shardwheel.tick.skipped                    Int64ObservableCounter        {tick}
//	Wakeups                        shardwheel.wakeups                         Int64ObservableCounter        {wakeup}
//	Refiled                        shardwheel.timer.refiled                   Int64ObservableCounter        {timer}
//	RefiledPeak                    shardwheel.pass.peak_refiled               Int64ObservableGauge          {timer}
//	HeldCancelled                  shardwheel.timer.held_cancelled            Int64ObservableUpDownCounter  {timer}
//	Sweeps                         shardwheel.sweep.completed                 Int64ObservableCounter        {sweep}
//	Swept                          shardwheel.sweep.freed                     Int64ObservableCounter        {timer}
//	SlowestPass.Duration           shardwheel.pass.slowest.duration           Float64ObservableGauge        s
//	SlowestPass.Transferred        shardwheel.pass.slowest.transferred        Int64ObservableGauge          {timer}
//	SlowestPass.Refiled            shardwheel.pass.slowest.refiled            Int64ObservableGauge          {timer}
//	SlowestPass.Cascaded           shardwheel.pass.slowest.cascaded           Int64ObservableGauge          {timer}
//	SlowestPass.Fired              shardwheel.pass.slowest.fired              Int64ObservableGauge          {timer}
//	Recent.SlowestPass.Duration    shardwheel.pass.recent_slowest.duration    Float64ObservableGauge        s
//	Recent.SlowestPass.Transferred shardwheel.pass.recent_slowest.transferred Int64ObservableGauge          {timer}
//	Recent.SlowestPass.Refiled     shardwheel.pass.recent_slowest.refiled     Int64ObservableGauge          {timer}
//	Recent.SlowestPass.Cascaded    shardwheel.pass.recent_slowest.cascaded    Int64ObservableGauge          {timer}
//	Recent.SlowestPass.Fired       shardwheel.pass.recent_slowest.fired       Int64ObservableGauge          {timer}
//	Recent.QueuedPeak              shardwheel.queue.recent_peak_depth         Int64ObservableGauge          {timer}
//	Recent.TransferPeak            shardwheel.transfer.recent_peak            Int64ObservableGauge          {timer}
//	Recent.RefiledPeak             shardwheel.pass.recent_peak_refiled        Int64ObservableGauge          {timer}
//	Panics                         shardwheel.task.panics                     Int64ObservableCounter        {panic}
//	PeriodicRuns                   shardwheel.periodic.runs                   Int64ObservableCounter        {run}
//	PeriodicMissed                 shardwheel.periodic.missed                 Int64ObservableCounter        {point}
//	Crossed                        shardwheel.timer.crossed                   Int64ObservableCounter        {timer}
//	NodesAllocated                 shardwheel.nodes.allocated                 Int64ObservableUpDownCounter  {node}
//	NodesReleased                  shardwheel.nodes.released                  Int64ObservableCounter        {node}
//	BlocksReleased                 shardwheel.blocks.released                 Int64ObservableCounter        {block}
//	BlocksRemade                   shardwheel.blocks.remade                   Int64ObservableCounter        {block}
//	BlockedRuns                    shardwheel.task.blocked_runs               Int64ObservableCounter        {task}
//	BlockedRefused                 shardwheel.task.blocked_refused            Int64ObservableCounter        {look}
//	Blocked (its length)           shardwheel.task.blocked                    Int64ObservableUpDownCounter  {task}
//	LongestBlocked.Running         shardwheel.task.longest_blocked            Float64ObservableGauge        s
//	TickLag                        shardwheel.tick.lag                        distribution, see below       s
//	Lateness                       shardwheel.task.lateness                   distribution, see below       s
//	PassTime                       shardwheel.pass.duration                   distribution, see below       s
//	TaskTime                       shardwheel.task.duration                   distribution, see below       s
//
// Counters, peaks and the slowest pass count since shardwheel.New; the
// recent instruments cover the last minute (stats.RecentWindow), and
// come down once an incident is over. stats.Pass.Ago is not reported: it
// grows between collections. Each shard publishes its counts once per
// pass, so a collection may lag a shard by one pass (see
// stats.Stats).
//
// # Distributions
//
// The API has no asynchronous histogram, so Register reports each
// distribution, named D above, as a summary of three instruments:
//
//	D.count     Int64ObservableCounter  durations recorded since New (unit {tick}, {task} or {pass})
//	D.sum       Float64ObservableCounter  their sum, s
//	D.quantile  Float64ObservableGauge  s, attributes shard and quantile (0.5, 0.9, 0.99, 0.999)
//
// Count and sum add up over shards and give a mean over any window. The
// quantiles are of the durations recorded since the previous collection
// (of any reader: with two readers, each sees the interval since the
// other's last collection); a shard that recorded none in it reports no
// point. They are within 1.6% of the exact quantile, and do not add up:
// a quantile over all shards cannot be derived from theirs (WithTotalOnly
// reports the total's). TaskTime's count counts tasks.
//
// With the OpenTelemetry SDK, the distributions can be exported as
// exponential histograms, with buckets, by the shardwheelsdk Producer;
// pass WithoutSummaries to Register then.
package shardwheelotel

// ScopeName is the instrumentation scope name to create the Meter of
// Register with.
const ScopeName = "github.com/shardwheel/shardwheel/otel"
