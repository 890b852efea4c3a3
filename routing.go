package shardwheel

import (
	"math/bits"
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// mix64 is the finaliser of MurmurHash3: every input bit affects every
// output bit, so sequential keys spread evenly over the shards.
func mix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// ShardOf returns the index of the shard that key routes to, in
// [0, Shards()).
func (s *Scheduler) ShardOf(key uint64) int {
	s.mustBeNew()
	return s.route(key)
}

// route is ShardOf for a Scheduler made by New.
func (s *Scheduler) route(key uint64) int {
	// Lemire's multiply-shift maps the hash onto [0, n) without a division.
	hi, _ := bits.Mul64(mix64(key), uint64(len(s.shards)))
	return int(hi)
}

// request describes a timer due delay from now.
func (s *Scheduler) request(key uint64, delay time.Duration, task shard.Task) shard.Request {
	return shard.Request{Key: key, Now: s.clock.Now(), Delay: delay, Task: task}
}

// localShard returns the shard of the P the caller runs on.
func (s *Scheduler) localShard() *shard.Shard {
	s.mustBeNew()
	return s.shards[shard.LocalShard(shard.CurrentP(), len(s.shards))]
}

// scheduleOn schedules r on sh, borrowing pending tokens from other shards
// and trying again while sh reports none.
func (s *Scheduler) scheduleOn(sh *shard.Shard, r *shard.Request) (Timer, error) {
	if sh.Closed() {
		return Timer{}, ErrStopped
	}
	var ref shard.Ref
	var rej shard.Reject
	for {
		if ref, rej = sh.Schedule(r); rej != shard.NoTokens || !s.borrowTokens(sh) {
			break
		}
	}
	switch rej {
	case shard.Accepted:
		return Timer{sh: sh, ref: ref, key: r.Key}, nil
	case shard.NoTokens:
		return Timer{}, s.errLimit
	case shard.ArenaFull:
		return Timer{}, errShardFull
	default:
		return Timer{}, ErrStopped
	}
}

// borrowTokens moves pending tokens from another shard into sh. It runs
// only when sh's own share is used up, i.e. near the WithMaxPending limit.
// When no shard has any it marks the scheduler dry, so that later
// rejections cost O(1), then looks once more (see shard/tokens.go for why).
func (s *Scheduler) borrowTokens(sh *shard.Shard) bool {
	if s.dry.Load() {
		return false
	}
	if s.takeFromAny(sh) {
		return true
	}
	s.dry.Store(true)
	if s.takeFromAny(sh) {
		s.dry.Store(false)
		return true
	}
	return false
}

// takeFromAny moves spare tokens from any shard, sh included, into sh.
func (s *Scheduler) takeFromAny(sh *shard.Shard) bool {
	for _, o := range s.shards {
		if sh.TakeTokens(o) {
			return true
		}
	}
	return false
}

// Pending returns the number of timers accepted and not yet ended (run,
// cancelled or returned by Stop). A timer whose task is running no longer
// counts. It is exact when the scheduler is quiescent; while timers are
// scheduled and cancelled concurrently it never reads above the number
// pending at one moment during the call (so never above WithMaxPending's
// limit) and never below 0. It takes no lock and writes nothing, but it
// reads counters on every shard that their holders write: called on every
// schedule and cancel of a churn, it added 83-99ns of CPU to each pair
// (51-64%; BENCHMARKS.md). To shed load at a limit, WithMaxPending's
// ErrTooManyPending costs nothing extra.
func (s *Scheduler) Pending() int {
	s.mustNotBeNil()
	// Every shard's ins, then every shard's outs: a token a timer gives
	// back on one shard may let another shard accept one, and reading
	// shard by shard could count both.
	var in, out uint64
	for _, sh := range s.shards {
		in += sh.Ins()
	}
	for _, sh := range s.shards {
		out += sh.Outs()
	}
	return int(in - min(out, in))
}

// shardOf returns the shard whose node r names.
func (s *Scheduler) shardOf(r shard.Ref) *shard.Shard { return s.shards[r.Shard()] }
