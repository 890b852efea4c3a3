package shardwheel

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/pool"
	"github.com/shardwheel/shardwheel/shard"
)

// Plan is the schedule of a series whose runs are not a fixed period
// apart: a calendar, a cron-like rule, a backoff. Next returns the point
// of the run after the one planned for prev: for the first run, prev is
// the time of the OnPlan call; after that, the point the run that just
// returned was planned for (not when it ran), or the point a Reset set.
// A series runs at each point, never earlier, and within about a tick
// after on a shard that keeps up.
//
// Next is called once on OnPlan's caller, for the first point, and then
// on the goroutine that ran the series' task, right after the task
// returned (or panicked), never on a shard's goroutine and never
// concurrently with the series' own runs. A point not after the run's end
// runs at the next tick; one more than MaxDelay after it is brought in to
// MaxDelay. The zero Time ends the series, as a Cancel would (Stats counts
// it cancelled). A Next that panics is reported as the task's panic would
// be, and leaves the series waiting MaxDelay, for a Reset, a Cancel or
// Stop.
type Plan interface {
	Next(prev time.Time) time.Time
}

// OnPlan runs task at the points plan gives (see Plan), a series like
// Every's: its handle's Cancel and CancelWait end it, Reset moves its next
// run to delay from now (a delay under the tick is refused, as for Every)
// and the plan goes on from that point, and Stop returns it. ByKey files
// it on the key's shard, as Every does; Slack and OnMissed do not apply
// (the plan chooses its points): they, a nil plan and a plan whose first
// point is the zero Time return an error wrapping ErrInvalidOption. A nil
// task returns ErrNilTask. OnPlan allocates the series' record and the
// plan's state: 4 allocations, 208 bytes.
func (s *Scheduler) OnPlan(plan Plan, task func(), opts ...TimerOption) (Timer, error) {
	if task == nil {
		return Timer{}, ErrNilTask
	}
	if plan == nil {
		return Timer{}, fmt.Errorf("%w: OnPlan: a nil Plan", ErrInvalidOption)
	}
	for _, o := range opts {
		if o.kind == optMissed {
			return Timer{}, fmt.Errorf("%w: OnPlan: OnMissed(%v): a plan chooses its own points", ErrInvalidOption,
				MissedPolicy(o.v))
		}
	}
	sp, err := s.specOf("OnPlan", true, 0, false, opts)
	if err != nil {
		return Timer{}, err
	}
	sh := s.localShard()
	if sp.byKey {
		sh = s.shards[s.route(sp.key)] // filed on its key's shard from the start, as a series
	}
	now := s.clock.Now()
	first := plan.Next(sh.Time(now))
	if first.IsZero() {
		return Timer{}, fmt.Errorf("%w: OnPlan: the plan has no first point (Next returned the zero Time)", ErrInvalidOption)
	}
	st := &planState{plan: plan, task: task, sh: sh}
	r := shard.Request{Key: sp.key, Now: now, Delay: sh.Reading(first) - now, Task: shard.Task{Func: st.run}, Plan: &st.points}
	t, err := s.scheduleOn(sh, &r)
	if err != nil {
		return Timer{}, err
	}
	st.self.Store(&t)
	if st.ended.Load() { // its first run's plan ended it before the handle was stored
		t.Cancel()
	}
	return t, nil
}

// planState is a plan's series' side of its runs: its task, wrapped so
// that the plan's next point is chosen on the run's goroutine, and the
// points it shares with the shard (pool.Plan).
//
// Ownership: plan, task and sh are immutable; points is the shard's and
// the runs' (see pool.Plan); self is stored once by OnPlan, and ended once
// by the run whose plan ended the series: whichever of the two comes
// second sees the other's store (sequentially consistent atomics) and
// cancels the series.
type planState struct {
	plan   Plan
	task   func()
	sh     *shard.Shard
	points pool.Plan
	self   atomic.Pointer[Timer]
	ended  atomic.Bool
}

// run is the series' task: the caller's, then the plan's next point, even
// if the task panics or ends its goroutine.
func (st *planState) run() {
	defer st.choose()
	st.task()
}

// choose asks the plan for the point after the one the run served, and
// leaves it for the shard, or ends the series on the zero Time.
func (st *planState) choose() {
	next := st.plan.Next(st.sh.Time(time.Duration(st.points.Served.Load())))
	if next.IsZero() {
		st.ended.Store(true)
		if t := st.self.Load(); t != nil {
			t.Cancel()
		}
		return
	}
	st.points.Next.Store(int64(st.sh.Reading(next)))
	st.points.Chosen.Store(true)
}
