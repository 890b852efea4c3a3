package stats

import (
	"cmp"
	"slices"
	"time"

	"github.com/shardwheel/shardwheel/internal/statsbridge"
	"github.com/shardwheel/shardwheel/shard"
)

func init() {
	statsbridge.Collect = func(pending, n int, engine func(int) shard.Stats) any { return collect(pending, n, engine) }
}

// collect makes the snapshot of a Scheduler whose Pending read pending and
// whose n shards' engines report engine(i).
func collect(pending, n int, engine func(int) shard.Stats) Stats {
	st := Stats{Pending: pending, Shards: make([]Shard, n)}
	for i := range n {
		st.Shards[i] = shardStats(engine(i))
		st.Total.Add(st.Shards[i])
	}
	return st
}

// shardStats converts the engine's statistics of one shard.
func shardStats(e shard.Stats) Shard {
	return Shard{
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
		Wakeups:       e.Wakeups,
		Refiled:       e.Refiled,
		RefiledPeak:   e.RefiledPeak,
		HeldCancelled: e.HeldCancelled,
		Sweeps:        e.Sweeps,
		Swept:         e.Swept,
		SlowestPass:   passOf(e.SlowestPass, e.Now),
		Recent: Recent{
			SlowestPass:  passOf(e.Recent.SlowestPass, e.Now),
			QueuedPeak:   e.Recent.QueuedPeak,
			TransferPeak: e.Recent.TransferPeak,
			RefiledPeak:  e.Recent.RefiledPeak,
		},
		Panics:         e.Panics,
		PeriodicRuns:   e.PeriodicRuns,
		PeriodicMissed: e.PeriodicMissed,
		Crossed:        e.Crossed,
		NodesAllocated: e.NodesAllocated,
		NodesReleased:  e.NodesReleased,
		BlocksReleased: e.BlocksReleased,
		BlocksRemade:   e.BlocksRemade,
		BlockedRuns:    e.BlockedRuns,
		BlockedRefused: e.BlockedRefused,
		Blocked:        blockedTasks(e.Blocked, e.Now),
		LongestBlocked: longestBlocked(e),
		TickLag:        Histogram{e.TickLag},
		Lateness:       Histogram{e.Lateness},
		PassTime:       Histogram{e.PassTime},
		TaskTime:       Histogram{e.TaskTime},
	}
}

// blockedTasks converts the engine's blocked tasks at clock reading now,
// the longest first.
func blockedTasks(e []shard.BlockedTask, now time.Duration) []BlockedTask {
	if len(e) == 0 {
		return nil
	}
	out := make([]BlockedTask, len(e))
	for i, b := range e {
		out[i] = BlockedTask{Key: b.Key, Keyed: b.Keyed, Func: b.Func, Running: max(now-b.Since, 0)}
	}
	slices.SortStableFunc(out, func(a, b BlockedTask) int { return cmp.Compare(b.Running, a.Running) })
	return out
}

// longestBlocked returns the task that ran longest of those that blocked
// on e's shard, returned or not.
func longestBlocked(e shard.Stats) BlockedTask {
	l := e.Longest
	longest := BlockedTask{Key: l.Key, Keyed: l.Keyed, Func: l.Func, Running: l.Ran}
	for _, b := range blockedTasks(e.Blocked, e.Now) {
		if b.Running > longest.Running {
			longest = b
		}
	}
	return longest
}

// passWork converts the engine's record of a pass, whose End is a reading
// of the clock that read now when the snapshot was taken. A pass never
// made (the zero record) is 0 ago.
func passOf(p shard.PassWork, now time.Duration) Pass {
	w := Pass{
		Duration:    p.Duration,
		Transferred: p.Transferred, Refiled: p.Refiled, Cascaded: p.Cascaded, Fired: p.Fired,
	}
	if p != (shard.PassWork{}) {
		w.Ago = max(now-p.End, 0)
	}
	return w
}
