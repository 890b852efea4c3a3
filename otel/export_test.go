package shardwheelotel

import (
	"go.opentelemetry.io/otel/metric"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

// RegisterForTest is Register taking its snapshots from stats, so that a
// test can count them.
func RegisterForTest(s *shardwheel.Scheduler, stats func() stats.Stats, meter metric.Meter, opts ...Option) (metric.Registration, error) {
	return register(s, stats, meter, opts...)
}
