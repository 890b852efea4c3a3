package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel/internal/hist"
)

// Tasks count their firings at once while workers publish their calls
// after each batch, so a reading may hold more firings than starts (it
// printed "prefill 0.0s -22.0 pending"): the line shows 0 instead.
func TestStatusLinePending(t *testing.T) {
	for _, c := range []struct {
		ops  opCounts
		want string
	}{
		{opCounts{}, "  0 pending"},
		{opCounts{Fired: 22}, "  0 pending"},
		{opCounts{Schedules: 10, Fired: 12}, "  0 pending"},
		{opCounts{Schedules: 5, Cancels: 3, Missed: 1, Fired: 4}, "  0 pending"},
		{opCounts{Schedules: 1500, Reopened: 100, Cancels: 50, Missed: 10, Fired: 60}, "  1.5k pending"},
	} {
		s := &status{impl: "impl", target: 1000,
			ops:  func() opCounts { return c.ops },
			late: func() hist.Snapshot { return hist.Snapshot{} }}
		s.enter("prefill", 0)
		line := s.line()
		assert.Contains(t, line, c.want, "%+v", c.ops)
		assert.NotContains(t, line, "-", "%+v", c.ops)
	}
}
