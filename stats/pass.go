package stats

import (
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// RecentWindow is the span of Shard.Recent: the passes that started
// in the current second of the Scheduler's clock or in the 60 before it.
// A peak leaves Recent between one minute and a minute and a second after
// its pass started.
const RecentWindow = shard.RecentWindow

// Recent is the slowest pass and the peaks of the passes of the last
// RecentWindow, each as its since-the-start counterpart in Shard
// describes it, with the differences said here. No field reads above its
// counterpart in the same Stats.
type Recent struct {
	// SlowestPass is the slowest of those passes.
	SlowestPass Pass `json:"slowest_pass"`
	// QueuedPeak is the most new timers one of those passes found in the
	// queue: those it took in plus those it left waiting.
	QueuedPeak int `json:"queued_peak"`
	// TransferPeak is the most timers moved from the queue to the wheel
	// in one tick, as the shard's passes of that tick left the count:
	// timers an AfterFunc call took in after the tick's last pass count in
	// Shard.TransferPeak only.
	TransferPeak int `json:"transfer_peak"`
	// RefiledPeak is the most timers one of those passes moved within
	// the wheel.
	RefiledPeak int `json:"refiled_peak"`
}

// Pass describes one pass of a shard: how long it took, what it did,
// and when. Its fields are read one by
// one while the shard may be replacing the pass: rarely, a snapshot pairs
// the figures of two passes.
type Pass struct {
	// Duration is how long the pass took (zero with WithStats(false)):
	// its own work (taking in, cascading and re-filing timers, handing
	// due tasks to the runner) and whatever held its goroutine meanwhile
	// (a wait for a CPU, a GC assist). No task runs in a pass.
	Duration time.Duration `json:"duration_ns"`
	// Transferred counts the new timers the pass moved from the queue
	// into the wheel, Refiled the timers it moved within the wheel
	// (Cascaded of them by cascades from a higher level, the rest Resets
	// found at their old slot), and Fired the tasks it handed to the
	// runner.
	Transferred int `json:"transferred"`
	Refiled     int `json:"refiled"`
	Cascaded    int `json:"cascaded"`
	Fired       int `json:"fired"`
	// Ago is how long before the snapshot the pass ended, on the
	// Scheduler's clock (with WithStats(false), started: passes are not
	// timed then). Zero for an empty record: no pass yet or, with
	// WithStats(false), none that did any work.
	Ago time.Duration `json:"ago_ns"`
}

// work is the pass's total work, which breaks ties between passes of equal
// duration.
func (p Pass) work() int { return p.Transferred + p.Refiled + p.Fired }

// slower reports whether p is a slower pass than q: longer, or as long
// and busier.
func (p Pass) slower(q Pass) bool {
	return p.Duration > q.Duration || p.Duration == q.Duration && p.work() > q.work()
}

// BlockedTask is a task that held up the tasks behind it for
// WithBlockedAfter, which went to another runner while it went on.
type BlockedTask struct {
	// Key is the timer's key, and Keyed whether the key's later timers
	// wait for the task (a one-shot timer with ByKey, or an Index's
	// one-shot timer). Timers without a key and series have none (a
	// series' next run waits for its last anyway): Keyed is false.
	Key   uint64 `json:"key"`
	Keyed bool   `json:"keyed"`
	// Func names the task's function as the runtime knows it (for a
	// Handler's timer, the handler's), empty if unknown.
	Func string `json:"func"`
	// Running is how long the task has run, at the snapshot, less up to
	// WithBlockedAfter and a tick (it is measured from the first look
	// that saw it running; LongestBlocked: how long it ran, to about a
	// tick, once it has returned).
	Running time.Duration `json:"running_ns"`
}
