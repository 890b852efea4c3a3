package shardwheel

import (
	"github.com/shardwheel/shardwheel/internal/statsbridge"
	"github.com/shardwheel/shardwheel/shard"
	"github.com/shardwheel/shardwheel/stats"
)

// Stats returns a snapshot of the scheduler's statistics (see package
// stats). It is safe for concurrent use, never blocks a shard, and
// allocates the snapshot (about 47 KB per shard): call it from a
// monitoring loop, not per request.
func (s *Scheduler) Stats() stats.Stats {
	pending := s.Pending()
	shardStats := func(i int) shard.Stats { return s.shards[i].Stats() }
	return statsbridge.Collect(pending, len(s.shards), shardStats).(stats.Stats)
}
