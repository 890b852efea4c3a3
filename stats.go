package shardwheel

import (
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// Stats is a snapshot of a Scheduler's statistics: totals and per shard.
// Counts are totals since New. Each shard publishes what its goroutine
// counts once per pass, so a snapshot may lag a shard by one pass, and its
// fields were not all read at the same instant: consistent enough for
// monitoring, not for accounting (use Scheduler.Pending for that).
type Stats struct {
	// Pending is Scheduler.Pending at the time of the snapshot.
	Pending int `json:"pending"`
	// Total adds up the shards: counts sum, peaks take the maximum and
	// distributions merge.
	Total ShardStats `json:"total"`
	// Shards holds each shard's statistics, by shard index.
	Shards []ShardStats `json:"shards"`
}

// ShardStats is the statistics of one shard (or, in Stats.Total, of all of
// them). Durations encode to JSON as integer nanoseconds, histograms as
// their percentiles.
type ShardStats struct {
	// Resident is the number of timer nodes the shard holds: timers in
	// its wheel (cancelled ones not yet freed included) plus those in its
	// queue.
	Resident int `json:"resident"`
	// Scheduled counts timers accepted by Schedule and its kin. Like every
	// counter here it never decreases. Summed over the shards, at
	// quiescence and after Stop, Scheduled = Fired + Cancelled + Stopped +
	// Scheduler.Pending(), with one exception: a Schedule that races with
	// Stop and returns ErrStopped stays counted if a Stats call counted it
	// before Stop undid it.
	Scheduled uint64 `json:"scheduled"`
	// Fired counts tasks started.
	Fired uint64 `json:"fired"`
	// Cancelled counts Cancel calls that returned true (CancelKey and
	// replacements by ScheduleKey included).
	Cancelled uint64 `json:"cancelled"`
	// TakenBack counts the cancelled timers whose node the cancelling
	// call freed itself: the shard did no work for them (a subset of
	// Cancelled).
	TakenBack uint64 `json:"taken_back"`
	// Reset counts successful Reset calls.
	Reset uint64 `json:"reset"`
	// Stopped counts timers Stop claimed.
	Stopped uint64 `json:"stopped"`
	// Queued is the number of new timers waiting in the shard's queue for
	// the wheel, and QueuedPeak the most a pass has found there.
	Queued     int `json:"queued"`
	QueuedPeak int `json:"queued_peak"`
	// TransferLast is the number of timers moved from the queue to the
	// wheel during the last tick that moved any, TransferPeak the most in
	// one tick, and CapHits the ticks that reached the transfer cap
	// (WithTransferCap).
	TransferLast int    `json:"transfer_last"`
	TransferPeak int    `json:"transfer_peak"`
	CapHits      uint64 `json:"cap_hits"`
	// Ticks counts passes that processed at least one new tick;
	// TicksSkipped counts ticks the shard slept through because nothing
	// was due (an idle shard does not wake every tick).
	Ticks        uint64 `json:"ticks"`
	TicksSkipped uint64 `json:"ticks_skipped"`
	// Refiled counts timers moved within the wheel: cascades from a
	// higher level, and Resets found at their old slot.
	Refiled uint64 `json:"refiled"`
	// RefiledPeak is the most timers one pass moved within the wheel.
	RefiledPeak int `json:"refiled_peak"`
	// HeldCancelled is the number of cancelled timers whose nodes the
	// shard still holds, in its wheel or its queue: a Cancel only marks its
	// timer, and the shard frees the node when it meets it (its slot comes
	// round, or it takes it in from the queue) or a sweep passes it.
	HeldCancelled int `json:"held_cancelled"`
	// Sweeps counts completed sweeps of the shard's nodes, and Swept the
	// cancelled nodes they freed.
	Sweeps uint64 `json:"sweeps"`
	Swept  uint64 `json:"swept"`
	// SlowestPass is the longest pass the shard made and what it did:
	// the cause of the worst stall a shard had.
	SlowestPass PassWork `json:"slowest_pass"`
	// Panics counts tasks that panicked (those an executor ran on its
	// own goroutines aside: their panics are the executor's), and tasks
	// that called runtime.Goexit (ErrTaskGoexit), wherever they ran.
	Panics uint64 `json:"panics"`
	// PeriodicRuns counts the runs of periodic timers' tasks (Every):
	// Fired does not count them, since a series is one timer however
	// often it runs.
	PeriodicRuns uint64 `json:"periodic_runs"`
	// PeriodicMissed counts the grid points periodic timers missed:
	// points that came while their series was behind (its previous run
	// not started or not returned), which SkipMissed and DelayMissed
	// drop and BurstMissed runs late.
	PeriodicMissed uint64 `json:"periodic_missed"`
	// Crossed counts the timers with a key (Schedule, ScheduleKey,
	// ScheduleWithin and their Handler forms) that this shard filed and
	// handed over to the shard their key routes to, as they came near
	// their deadline, for that shard's goroutine to run. A timer
	// cancelled before it comes near never crosses. It counts in the
	// Scheduled, Fired, Cancelled or Stopped of the shard that filed it.
	Crossed uint64 `json:"crossed"`
	// NodesAllocated is the timer nodes the shard's storage holds now,
	// in use or free, and NodesReleased the nodes it has given back to
	// the garbage collector so far: after a spike of timers has ended,
	// the shard releases the storage its wheel no longer needs, in blocks
	// of 16,384 nodes (or WithFirstBlock's, if larger). BlocksReleased counts those blocks, and
	// BlocksRemade the released blocks a later burst made again.
	NodesAllocated uint64 `json:"nodes_allocated"`
	NodesReleased  uint64 `json:"nodes_released"`
	BlocksReleased uint64 `json:"blocks_released"`
	BlocksRemade   uint64 `json:"blocks_remade"`
	// TickLag is how late the shard started processing a tick it had
	// planned to wake for, versus the tick's start. A shard parked with
	// nothing due plans no tick: the pass a new timer wakes it for
	// records no lag.
	TickLag Histogram `json:"tick_lag"`
	// Lateness is how late tasks started versus their deadline tick's
	// start, which is the requested deadline (the clock reading of the
	// Schedule or Reset call plus the delay) rounded up to the tick grid:
	// what the task sees is Lateness plus less than one tick. Up to 64
	// tasks of one tick share a sample.
	Lateness Histogram `json:"lateness"`
	// PassTime is how long each pass took: picking up new timers,
	// cascades, and the due tasks it ran.
	PassTime Histogram `json:"pass_time"`
	// TaskTime is the run time of tasks run inline (or handed to the
	// executor), sampled one task in 16.
	TaskTime Histogram `json:"task_time"`
}

// PassWork describes one pass of a shard: how long it took and what it
// did.
type PassWork struct {
	// Duration is how long the pass took (zero with WithStats(false)).
	Duration time.Duration `json:"duration_ns"`
	// Transferred counts the new timers the pass moved from the queue
	// into the wheel, Refiled the timers it moved within the wheel, and
	// Fired the tasks it ran.
	Transferred int `json:"transferred"`
	Refiled     int `json:"refiled"`
	Fired       int `json:"fired"`
}

// work is the pass's total work, which breaks ties between passes of equal
// duration.
func (p PassWork) work() int { return p.Transferred + p.Refiled + p.Fired }

// Add accumulates o into s: counts add up, peaks take the larger value and
// distributions merge. Stats.Total is the Add of every shard.
func (s *ShardStats) Add(o ShardStats) {
	s.Resident += o.Resident
	s.Scheduled += o.Scheduled
	s.Fired += o.Fired
	s.Cancelled += o.Cancelled
	s.TakenBack += o.TakenBack
	s.Reset += o.Reset
	s.Stopped += o.Stopped
	s.Queued += o.Queued
	s.QueuedPeak = max(s.QueuedPeak, o.QueuedPeak)
	s.TransferLast += o.TransferLast
	s.TransferPeak = max(s.TransferPeak, o.TransferPeak)
	s.CapHits += o.CapHits
	s.Ticks += o.Ticks
	s.TicksSkipped += o.TicksSkipped
	s.Refiled += o.Refiled
	s.RefiledPeak = max(s.RefiledPeak, o.RefiledPeak)
	s.HeldCancelled += o.HeldCancelled
	s.Sweeps += o.Sweeps
	s.Swept += o.Swept
	if o.SlowestPass.Duration > s.SlowestPass.Duration ||
		o.SlowestPass.Duration == s.SlowestPass.Duration && o.SlowestPass.work() > s.SlowestPass.work() {
		s.SlowestPass = o.SlowestPass
	}
	s.Panics += o.Panics
	s.PeriodicRuns += o.PeriodicRuns
	s.PeriodicMissed += o.PeriodicMissed
	s.Crossed += o.Crossed
	s.NodesAllocated += o.NodesAllocated
	s.NodesReleased += o.NodesReleased
	s.BlocksReleased += o.BlocksReleased
	s.BlocksRemade += o.BlocksRemade
	s.TickLag.Merge(o.TickLag)
	s.Lateness.Merge(o.Lateness)
	s.PassTime.Merge(o.PassTime)
	s.TaskTime.Merge(o.TaskTime)
}

// Sub returns the statistics of the interval from prev, an earlier
// snapshot of the same shard (or total), to s: counts subtract (saturating
// at 0), distributions hold the interval's values (see Histogram.Sub), and
// levels and peaks (Resident, Queued, HeldCancelled, NodesAllocated, the
// peaks and SlowestPass) are s's own, since an interval's cannot be derived.
func (s ShardStats) Sub(prev ShardStats) ShardStats {
	d := s
	sub := func(a, b uint64) uint64 { return a - min(a, b) }
	d.Scheduled = sub(s.Scheduled, prev.Scheduled)
	d.Fired = sub(s.Fired, prev.Fired)
	d.Cancelled = sub(s.Cancelled, prev.Cancelled)
	d.TakenBack = sub(s.TakenBack, prev.TakenBack)
	d.Reset = sub(s.Reset, prev.Reset)
	d.Stopped = sub(s.Stopped, prev.Stopped)
	d.CapHits = sub(s.CapHits, prev.CapHits)
	d.Ticks = sub(s.Ticks, prev.Ticks)
	d.TicksSkipped = sub(s.TicksSkipped, prev.TicksSkipped)
	d.Refiled = sub(s.Refiled, prev.Refiled)
	d.Sweeps = sub(s.Sweeps, prev.Sweeps)
	d.Swept = sub(s.Swept, prev.Swept)
	d.Panics = sub(s.Panics, prev.Panics)
	d.PeriodicRuns = sub(s.PeriodicRuns, prev.PeriodicRuns)
	d.PeriodicMissed = sub(s.PeriodicMissed, prev.PeriodicMissed)
	d.Crossed = sub(s.Crossed, prev.Crossed)
	d.NodesReleased = sub(s.NodesReleased, prev.NodesReleased)
	d.BlocksReleased = sub(s.BlocksReleased, prev.BlocksReleased)
	d.BlocksRemade = sub(s.BlocksRemade, prev.BlocksRemade)
	d.TickLag = s.TickLag.Sub(prev.TickLag)
	d.Lateness = s.Lateness.Sub(prev.Lateness)
	d.PassTime = s.PassTime.Sub(prev.PassTime)
	d.TaskTime = s.TaskTime.Sub(prev.TaskTime)
	return d
}

// Sub returns the statistics of the interval from prev, an earlier
// snapshot of the same Scheduler, to s (see ShardStats.Sub): what a
// monitoring loop reports for the last N seconds.
func (s Stats) Sub(prev Stats) Stats {
	d := Stats{Pending: s.Pending, Total: s.Total.Sub(prev.Total), Shards: make([]ShardStats, len(s.Shards))}
	for i := range s.Shards {
		if i < len(prev.Shards) {
			d.Shards[i] = s.Shards[i].Sub(prev.Shards[i])
		} else {
			d.Shards[i] = s.Shards[i]
		}
	}
	return d
}

// Stats returns a snapshot of the scheduler's statistics. It is safe for
// concurrent use, never blocks a shard, and allocates the snapshot (about
// 40 KB per shard): call it from a monitoring loop, not per request.
func (s *Scheduler) Stats() Stats {
	st := Stats{Pending: s.Pending(), Shards: make([]ShardStats, len(s.shards))}
	for i, sh := range s.shards {
		st.Shards[i] = shardStats(sh.Stats())
		st.Total.Add(st.Shards[i])
	}
	return st
}

// shardStats converts the engine's statistics of one shard.
func shardStats(e shard.Stats) ShardStats {
	return ShardStats{
		Resident:      e.Resident,
		Scheduled:     e.Scheduled,
		Fired:         e.Fired,
		Cancelled:     e.Cancelled,
		TakenBack:     e.TakenBack,
		Reset:         e.Reset,
		Stopped:       e.Stopped,
		Queued:        e.Queued,
		QueuedPeak:    e.QueuedPeak,
		TransferLast:  e.TransferLast,
		TransferPeak:  e.TransferPeak,
		CapHits:       e.CapHits,
		Ticks:         e.Ticks,
		TicksSkipped:  e.TicksSkipped,
		Refiled:       e.Refiled,
		RefiledPeak:   e.RefiledPeak,
		HeldCancelled: e.HeldCancelled,
		Sweeps:        e.Sweeps,
		Swept:         e.Swept,
		SlowestPass: PassWork{
			Duration:    e.SlowestPass.Duration,
			Transferred: e.SlowestPass.Transferred,
			Refiled:     e.SlowestPass.Refiled,
			Fired:       e.SlowestPass.Fired,
		},
		Panics:         e.Panics,
		PeriodicRuns:   e.PeriodicRuns,
		PeriodicMissed: e.PeriodicMissed,
		Crossed:        e.Crossed,
		NodesAllocated: e.NodesAllocated,
		NodesReleased:  e.NodesReleased,
		BlocksReleased: e.BlocksReleased,
		BlocksRemade:   e.BlocksRemade,
		TickLag:        Histogram{e.TickLag},
		Lateness:       Histogram{e.Lateness},
		PassTime:       Histogram{e.PassTime},
		TaskTime:       Histogram{e.TaskTime},
	}
}
