// Package stats holds the statistics a shardwheel.Scheduler reports:
// Scheduler.Stats returns a Stats, a snapshot of every shard's counts,
// peaks and duration histograms (tick lag, task lateness, pass and task
// time) and their total. Stats.Sub turns two snapshots into the figures of
// the interval between them, which is what a monitoring loop reports;
// packages profiling, prometheus and otel export them.
//
// Every type here is a plain value, safe to copy and to read from any
// goroutine; a snapshot shares nothing with the Scheduler that made it.
package stats
