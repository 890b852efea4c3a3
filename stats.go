package shardwheel

import "github.com/shardwheel/shardwheel/shard"

// ShardStats is the statistics of one shard; see Stats.
type ShardStats = shard.Stats

// Stats is a snapshot of a Scheduler's statistics: totals and per shard.
// Histograms (TickLag, Lateness, TaskTime) encode to JSON as their
// percentiles; in memory they keep their buckets, so that a reader can
// subtract two snapshots (hist.Snapshot.Sub) to see an interval.
type Stats struct {
	// Pending is Scheduler.Pending at the time of the snapshot.
	Pending int `json:"pending"`
	// Total adds up the shards: counts sum, peaks take the maximum and
	// distributions merge.
	Total ShardStats `json:"total"`
	// Shards holds each shard's statistics, by shard index.
	Shards []ShardStats `json:"shards"`
}

// Stats returns a snapshot of the scheduler's statistics. It is safe for
// concurrent use, never blocks a shard, and allocates the snapshot (about
// 30 KB per shard): call it from a monitoring loop, not per request.
func (s *Scheduler) Stats() Stats {
	st := Stats{Pending: s.Pending(), Shards: make([]ShardStats, len(s.shards))}
	for i, sh := range s.shards {
		st.Shards[i] = sh.Stats()
		st.Total.Add(st.Shards[i])
	}
	return st
}
