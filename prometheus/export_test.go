package shardwheelprom

import (
	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

// NewCollectorForTest returns a Collector of s that takes its snapshots
// from stats, so that a test can count them.
func NewCollectorForTest(s *shardwheel.Scheduler, stats func() stats.Stats, opts ...Option) *Collector {
	c := NewCollector(s, opts...)
	c.stats = stats
	return c
}
