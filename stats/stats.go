package stats

import (
	"cmp"
	"slices"
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
	Total Shard `json:"total"`
	// Shards holds each shard's statistics, by shard index.
	Shards []Shard `json:"shards"`
}

// Shard is the statistics of one shard (or, in Stats.Total, of all of
// them). Durations encode to JSON as integer nanoseconds, histograms as
// their percentiles.
type Shard struct {
	// Resident is the number of timer nodes the shard holds, as of its
	// last pass: its timers not yet ended, wherever they wait (its wheel,
	// its queue, or handed to the shard their key routes to), the ended
	// ones whose nodes it has not freed yet (HeldCancelled among them),
	// and the nodes that stand in its wheel for timers other shards
	// handed to it (their keys route here).
	Resident int `json:"resident"`
	// Scheduled counts timers accepted by AfterFunc and its kin. Like every
	// counter here it never decreases. Summed over the shards, at
	// quiescence and after Stop, Scheduled = Fired + Cancelled + Stopped +
	// Scheduler.Pending(), with one exception: a call that races with
	// Stop and returns ErrStopped stays counted if a Stats call counted it
	// before Stop undid it.
	Scheduled uint64 `json:"scheduled"`
	// Fired counts the timers that fired: their tasks handed to the
	// shard's runner, which starts each after those handed before it
	// (TaskTime counts them as they return).
	Fired uint64 `json:"fired"`
	// Cancelled counts Cancel calls that returned true (an Index's
	// Cancel and the timers its AfterFunc and Every replaced included).
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
	// Wakeups counts the times the shard goroutine woke from a sleep: for
	// a tick it planned (a timer due, a cascade, housekeeping), for a
	// timer filed due earlier, or at a Stats call that found it asleep.
	// It plans its sleep, as it goes to sleep, for the earliest deadline
	// of a timer still pending then; a Cancel or a later Reset never
	// moves that plan, so a timer cancelled while the goroutine sleeps
	// for it still wakes it, and the pass frees it. A shard with nothing
	// pending sleeps untimed. A rate of this is what an idle Scheduler
	// costs the machine.
	Wakeups uint64 `json:"wakeups"`
	// Refiled counts timers moved within the wheel: cascades from a
	// higher level, and Resets found at their old slot.
	Refiled uint64 `json:"refiled"`
	// RefiledPeak is the most timers one pass moved within the wheel.
	RefiledPeak int `json:"refiled_peak"`
	// HeldCancelled is the number of cancelled timers whose nodes the shard
	// still holds (in its wheel, its queue, or handed to another shard), as
	// of its last pass, the pass Resident is read at: never above
	// Resident. A Cancel only marks its timer, and the shard frees the
	// node when it meets it (its slot comes round, or it takes it in from
	// the queue) or a sweep passes it.
	HeldCancelled int `json:"held_cancelled"`
	// Sweeps counts completed sweeps of the shard's nodes, and Swept the
	// cancelled nodes they freed.
	Sweeps uint64 `json:"sweeps"`
	Swept  uint64 `json:"swept"`
	// SlowestPass is the longest pass the shard made and what it did:
	// the cause of the worst stall a shard had. Like QueuedPeak,
	// TransferPeak and RefiledPeak it only rises; Recent holds the same
	// figures over the last minute.
	SlowestPass Pass `json:"slowest_pass"`
	// Recent is the slowest pass and the peaks of the last RecentWindow,
	// which come down once an incident is over.
	Recent Recent `json:"recent"`
	// Panics counts tasks that panicked (those an executor ran on its
	// own goroutines aside: their panics are the executor's), and tasks
	// that called runtime.Goexit (ErrTaskGoexit), wherever they ran.
	Panics uint64 `json:"panics"`
	// PeriodicRuns counts the runs of periodic timers' tasks (Every) as
	// they are handed to the runner: Fired does not count them, since a
	// series is one timer however often it runs. A run whose series is
	// cancelled while it waits behind other tasks is counted and does not
	// start.
	PeriodicRuns uint64 `json:"periodic_runs"`
	// PeriodicMissed counts the grid points periodic timers missed:
	// points that came while their series was behind (its previous run
	// not started or not returned), which SkipMissed and DelayMissed
	// drop and BurstMissed runs late.
	PeriodicMissed uint64 `json:"periodic_missed"`
	// Crossed counts the timers with a key (ByKey one-shot timers and
	// an Index's one-shot timers) that this shard filed and
	// handed over to the shard their key routes to, as they came near
	// their deadline, for that shard's runner to run. A timer
	// cancelled before it comes near never crosses. It counts in the
	// Scheduled, Fired, Cancelled or Stopped of the shard that filed it.
	Crossed uint64 `json:"crossed"`
	// NodesAllocated is the timer nodes the shard's storage holds now,
	// in use or free, and NodesReleased the nodes it has given back to
	// the garbage collector so far. After a spike of timers has ended,
	// the shard releases the storage its wheel no longer needs, in blocks
	// of 16,384 nodes (or WithInitialCapacity's, if larger), reviewing at most
	// once a second: it keeps the blocks its live timers occupy and free
	// nodes of at most the largest of a block, an eighth of its timers,
	// twice what other goroutines took from it in the last second and
	// what it used at once since the previous review, plus a block, and
	// a cancelled timer's node is freed within seconds. BlocksReleased
	// counts the blocks given back, and BlocksRemade the released blocks
	// a later burst made again.
	NodesAllocated uint64 `json:"nodes_allocated"`
	NodesReleased  uint64 `json:"nodes_released"`
	BlocksReleased uint64 `json:"blocks_released"`
	BlocksRemade   uint64 `json:"blocks_remade"`
	// BlockedRuns counts the times a task held up the tasks behind it
	// for WithBlockedAfter and they went to another runner (a task
	// preempted that long counts too), BlockedRefused the looks the
	// WithMaxBlockedTasks bound refused (one every WithBlockedAfter
	// while tasks wait behind a blocked one), and Blocked lists those
	// tasks that have not returned, the longest first: exactly those,
	// whenever the snapshot is taken, Stop or not. LongestBlocked is the
	// one that ran longest, returned or not (in Blocked then): Running
	// says how long it ran; the zero value if there was none.
	BlockedRuns    uint64        `json:"blocked_runs"`
	BlockedRefused uint64        `json:"blocked_refused"`
	Blocked        []BlockedTask `json:"blocked,omitempty"`
	LongestBlocked BlockedTask   `json:"longest_blocked"`
	// TickLag is how late the shard started processing the tick it was
	// due to wake for, versus the tick's start: the tick it planned, or
	// the earlier one a timer filed while it slept asked for. It is
	// lateness, not sleep: a wake for a timer cancelled meanwhile records
	// how late that wake came, and the next wake its own. A pass woken
	// before its tick (a signal) records none.
	TickLag Histogram `json:"tick_lag"`
	// Lateness is how late tasks started versus their deadline tick's
	// start, which is the requested deadline (the clock reading of the
	// AfterFunc or Reset call plus the delay) rounded up to the tick grid:
	// what the task sees is Lateness plus less than one tick. Every task
	// is measured as its runner starts it (with WithExecutor, as it hands
	// it to the executor), so a task's wait behind the tasks before it is
	// in it.
	Lateness Histogram `json:"lateness"`
	// PassTime is how long each pass took: picking up new timers,
	// cascades, and handing the due tasks to the runner. Tasks never run
	// in a pass.
	PassTime Histogram `json:"pass_time"`
	// TaskTime is the run time of each task (with WithExecutor, of the
	// executor's run calls), from the clock reading that starts it to the
	// one that ends it, which starts the next: one clock read a task.
	TaskTime Histogram `json:"task_time"`
}

// Add accumulates o into s: counts add up, peaks take the larger value and
// distributions merge. Stats.Total is the Add of every shard.
func (s *Shard) Add(o Shard) {
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
	s.Wakeups += o.Wakeups
	s.Refiled += o.Refiled
	s.RefiledPeak = max(s.RefiledPeak, o.RefiledPeak)
	s.HeldCancelled += o.HeldCancelled
	s.Sweeps += o.Sweeps
	s.Swept += o.Swept
	if o.SlowestPass.slower(s.SlowestPass) {
		s.SlowestPass = o.SlowestPass
	}
	if o.Recent.SlowestPass.slower(s.Recent.SlowestPass) {
		s.Recent.SlowestPass = o.Recent.SlowestPass
	}
	s.Recent.QueuedPeak = max(s.Recent.QueuedPeak, o.Recent.QueuedPeak)
	s.Recent.TransferPeak = max(s.Recent.TransferPeak, o.Recent.TransferPeak)
	s.Recent.RefiledPeak = max(s.Recent.RefiledPeak, o.Recent.RefiledPeak)
	s.Panics += o.Panics
	s.PeriodicRuns += o.PeriodicRuns
	s.PeriodicMissed += o.PeriodicMissed
	s.Crossed += o.Crossed
	s.NodesAllocated += o.NodesAllocated
	s.NodesReleased += o.NodesReleased
	s.BlocksReleased += o.BlocksReleased
	s.BlocksRemade += o.BlocksRemade
	s.BlockedRuns += o.BlockedRuns
	s.BlockedRefused += o.BlockedRefused
	s.Blocked = append(s.Blocked, o.Blocked...)
	slices.SortStableFunc(s.Blocked, func(a, b BlockedTask) int { return cmp.Compare(b.Running, a.Running) })
	if o.LongestBlocked.Running > s.LongestBlocked.Running {
		s.LongestBlocked = o.LongestBlocked
	}
	s.TickLag.Merge(o.TickLag)
	s.Lateness.Merge(o.Lateness)
	s.PassTime.Merge(o.PassTime)
	s.TaskTime.Merge(o.TaskTime)
}

// Sub returns the statistics of the interval from prev, an earlier
// snapshot of the same shard (or total), to s: counts subtract (saturating
// at 0), distributions hold the interval's values (see Histogram.Sub), and
// levels and peaks (Resident, Queued, HeldCancelled, NodesAllocated, the
// peaks, SlowestPass and Recent) are s's own, since an interval's cannot
// be derived.
func (s Shard) Sub(prev Shard) Shard {
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
	d.Wakeups = sub(s.Wakeups, prev.Wakeups)
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
	d.BlockedRuns = sub(s.BlockedRuns, prev.BlockedRuns)
	d.BlockedRefused = sub(s.BlockedRefused, prev.BlockedRefused)
	d.TickLag = s.TickLag.Sub(prev.TickLag)
	d.Lateness = s.Lateness.Sub(prev.Lateness)
	d.PassTime = s.PassTime.Sub(prev.PassTime)
	d.TaskTime = s.TaskTime.Sub(prev.TaskTime)
	return d
}

// Sub returns the statistics of the interval from prev, an earlier
// snapshot of the same Scheduler, to s (see Shard.Sub): what a
// monitoring loop reports for the last N seconds.
func (s Stats) Sub(prev Stats) Stats {
	d := Stats{Pending: s.Pending, Total: s.Total.Sub(prev.Total), Shards: make([]Shard, len(s.Shards))}
	for i := range s.Shards {
		if i < len(prev.Shards) {
			d.Shards[i] = s.Shards[i].Sub(prev.Shards[i])
		} else {
			d.Shards[i] = s.Shards[i]
		}
	}
	return d
}
