package shardwheelsdk

import (
	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

// NewProducerForTest returns a Producer of s that takes its snapshots
// from stats, so that a test can count them.
func NewProducerForTest(s *shardwheel.Scheduler, stats func() stats.Stats) *Producer {
	p := NewProducer(s)
	p.stats = stats
	return p
}
