// Package shardwheelprom exports a shardwheel.Scheduler's statistics to
// Prometheus: a prometheus.Collector that takes one Scheduler.Stats
// snapshot per scrape.
//
//	s, _ := shardwheel.New()
//	prometheus.MustRegister(shardwheelprom.NewCollector(s))
//	http.Handle("/metrics", promhttp.Handler())
//
// It lives in a module of its own, so that a program that imports
// shardwheel without it never downloads client_golang.
//
// # Metrics
//
// Every metric but shardwheel_pending_timers has the label shard, the
// shard's index ("0", "1", ...). Stats.Total is not exported then: sum the
// counters, levels and histograms over shards (sum without (shard)), and
// take the max of the peaks and of the slowest pass. Exporting the total
// too would double every such sum. WithTotalOnly exports Stats.Total
// instead, without the label.
//
//	stats.Shard field              name                                                 type       unit
//	Pending (Stats)                shardwheel_pending_timers                            gauge
//	Resident                       shardwheel_resident_timers                           gauge
//	Scheduled                      shardwheel_timers_scheduled_total                    counter
//	Fired                          shardwheel_timers_fired_total                        counter
//	Cancelled                      shardwheel_timers_cancelled_total                    counter
//	TakenBack                      shardwheel_timers_taken_back_total                   counter
//	Reset                          shardwheel_timer_resets_total                        counter
//	Stopped                        shardwheel_timers_stopped_total                      counter
//	Queued                         shardwheel_queued_timers                             gauge
//	QueuedPeak                     shardwheel_queued_peak_timers                        gauge
//	TransferLast                   shardwheel_transfer_last_timers                      gauge
//	TransferPeak                   shardwheel_transfer_peak_timers                      gauge
//	CapHits                        shardwheel_transfer_cap_hits_total                   counter
//	Ticks                          shardwheel_tick_passes_total                         counter
//	TicksSkipped                   shardwheel_ticks_skipped_total                       counter
//	Wakeups                        shardwheel_wakeups_total                             counter
//	Refiled                        shardwheel_timers_refiled_total                      counter
//	RefiledPeak                    shardwheel_refiled_peak_timers                       gauge
//	HeldCancelled                  shardwheel_held_cancelled_timers                     gauge
//	Sweeps                         shardwheel_sweeps_total                              counter
//	Swept                          shardwheel_swept_timers_total                        counter
//	SlowestPass.Duration           shardwheel_slowest_pass_seconds                      gauge      seconds
//	SlowestPass.Transferred        shardwheel_slowest_pass_transferred_timers           gauge
//	SlowestPass.Refiled            shardwheel_slowest_pass_refiled_timers               gauge
//	SlowestPass.Cascaded           shardwheel_slowest_pass_cascaded_timers              gauge
//	SlowestPass.Fired              shardwheel_slowest_pass_fired_timers                 gauge
//	Recent.SlowestPass.Duration    shardwheel_recent_slowest_pass_seconds               gauge      seconds
//	Recent.SlowestPass.Transferred shardwheel_recent_slowest_pass_transferred_timers    gauge
//	Recent.SlowestPass.Refiled     shardwheel_recent_slowest_pass_refiled_timers        gauge
//	Recent.SlowestPass.Cascaded    shardwheel_recent_slowest_pass_cascaded_timers       gauge
//	Recent.SlowestPass.Fired       shardwheel_recent_slowest_pass_fired_timers          gauge
//	Recent.QueuedPeak              shardwheel_recent_queued_peak_timers                 gauge
//	Recent.TransferPeak            shardwheel_recent_transfer_peak_timers               gauge
//	Recent.RefiledPeak             shardwheel_recent_refiled_peak_timers                gauge
//	Panics                         shardwheel_task_panics_total                         counter
//	PeriodicRuns                   shardwheel_periodic_runs_total                       counter
//	PeriodicMissed                 shardwheel_periodic_missed_total                     counter
//	Crossed                        shardwheel_timers_crossed_total                      counter
//	NodesAllocated                 shardwheel_nodes_allocated                           gauge
//	NodesReleased                  shardwheel_nodes_released_total                      counter
//	BlocksReleased                 shardwheel_blocks_released_total                     counter
//	BlocksRemade                   shardwheel_blocks_remade_total                       counter
//	BlockedRuns                    shardwheel_blocked_runs_total                        counter
//	BlockedRefused                 shardwheel_blocked_refused_total                     counter
//	Blocked (its length)           shardwheel_blocked_tasks                             gauge
//	LongestBlocked.Running         shardwheel_longest_blocked_task_seconds              gauge      seconds
//	TickLag                        shardwheel_tick_lag_seconds                          histogram  seconds
//	Lateness                       shardwheel_task_lateness_seconds                     histogram  seconds
//	PassTime                       shardwheel_pass_duration_seconds                     histogram  seconds
//	TaskTime                       shardwheel_task_duration_seconds                     histogram  seconds
//
// Counters, peaks and the slowest pass count since shardwheel.New; the
// recent_ gauges cover the last minute (stats.RecentWindow), and come
// down once an incident is over. Each shard publishes its counts once per
// pass, so a scrape may lag a shard by one pass (see stats.Stats).
//
// # Series
//
// A scrape holds 47 gauges and counters per shard plus, per histogram (5
// per shard), one series per classic bound, +Inf, _sum and _count. With a
// 1ms tick and the default bounds (TickBuckets, 35 bounds) that is 237
// series per shard; with WithBuckets(DecadeBuckets...) 172; with
// WithBuckets() (native histograms alone) 62. At 64 shards the default is
// 64 × 237 + 1 (shardwheel_pending_timers) = 15,169 series. WithTotalOnly
// exports one set for the whole Scheduler: 238 series whatever its
// shards.
//
// # Histograms
//
// A Histogram's buckets are 1/32 of a power of two of nanoseconds wide
// (exact below 64ns), at most 3.125% of their value; no Prometheus bucket
// lines up with them. Each histogram carries two forms, built from the
// same snapshot and both in seconds:
//
//   - Classic buckets, at TickBuckets(s.Tick())' upper bounds by default
//     (or WithBuckets'). Each of our buckets counts at its upper bound, so
//     one that straddles a bound counts above it: the le="b" count holds
//     every duration up to b/(1+1/32) and none above b. A duration within
//     3.125% below a bound may show in the next bucket, never in a lower
//     one.
//   - Native buckets (schema 5: 32 per power of two, 2.2% apart), which
//     a Prometheus with native histograms enabled takes from a protobuf
//     scrape. Each of our buckets lands whole in the native bucket that
//     holds its upper bound, with the same error: a duration is never
//     shown below its value and at most 3.125% above it. The zero bucket
//     (threshold 0) counts the durations that were exactly 0.
//
// _sum is Histogram.Sum in seconds and _count is Histogram.Count, which
// the buckets add up to. Durations over 2^40-1ns (18m19s), which a
// Histogram keeps in its last bucket, count at 18m19s in the buckets and
// with their true value in _sum. TaskTime's _count counts tasks.
//
// The native form has no created timestamp: when the Scheduler started is
// not known from its Stats.
//
// # Quantiles of the classic form near the tick
//
// histogram_quantile interpolates linearly within the classic bucket that
// holds the quantile, so its estimate can be off by up to that bucket's
// width. Lateness and tick lag gather between 0 and one tick plus a
// millisecond: with DecadeBuckets and a 1ms tick, the bounds there are
// 1ms and 2.5ms, and a p99 of 1.1ms can read as anything up to 2.5ms.
// TickBuckets put a bound every eighth of a tick from half a tick to two
// ticks: between one tick and two, an estimate is within an eighth of a
// tick, 12.5% of the value, plus the 3.125% above. The native form is
// within 3.125% everywhere.
//
// # Which form Prometheus keeps
//
// The Collector always exposes both. Which one Prometheus stores depends
// on its version and configuration:
//
//   - Native histograms off (before 2.40; from 2.40 to 3.8 without
//     --enable-feature=native-histograms; from 3.9 without
//     scrape_native_histograms: true): the classic form only.
//   - Native histograms on: a histogram exposed in both forms is stored
//     in its native form only, its classic _bucket series dropped, unless
//     the scrape configuration keeps them too: scrape_classic_histograms:
//     true from 2.45 to 2.x, always_scrape_classic_histograms: true from
//     3.0. Dashboards and alerts on _bucket series need that setting.
//
// Native histograms need the protobuf exposition, which Prometheus asks
// for when they are on and promhttp serves.
package shardwheelprom
