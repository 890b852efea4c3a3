package shardwheel

import (
	"errors"
	"fmt"

	"github.com/shardwheel/shardwheel/shard"
)

// MissedPolicy says what a series (Every) does with the grid points it
// missed while it was behind (see OnMissed); SkipMissed is the default.
type MissedPolicy uint8

const (
	SkipMissed  MissedPolicy = iota // run once for all of them, then go on at the next future grid point
	BurstMissed                     // run once for each of them, back to back, then go on on the grid
	DelayMissed                     // run once, and the grid restarts one period after this run returns
)

// engine returns the engine's value of the policy m (shard.SkipMissed and
// its kin), and false for a value that is no policy. The engine's
// constants are its own: this switch, not a conversion, joins the two, and
// TestMissedMatchesTheEngine checks it.
func (m MissedPolicy) engine() (uint8, bool) {
	switch m {
	case SkipMissed:
		return shard.SkipMissed, true
	case BurstMissed:
		return shard.BurstMissed, true
	case DelayMissed:
		return shard.DelayMissed, true
	}
	return 0, false
}

// String returns the constant's name.
func (m MissedPolicy) String() string {
	switch m {
	case SkipMissed:
		return "SkipMissed"
	case BurstMissed:
		return "BurstMissed"
	case DelayMissed:
		return "DelayMissed"
	}
	return fmt.Sprintf("MissedPolicy(%d)", uint8(m))
}

var (
	// ErrBadPeriod is returned by Every and its kin for a period shorter
	// than the Scheduler's tick (a period <= 0 included): the wheel runs
	// a series at most once a tick, so a shorter period could only miss
	// grid points.
	ErrBadPeriod = errors.New("shardwheel: Every: period must be at least the tick")
)
