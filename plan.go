package shardwheel

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/pool"
	"github.com/shardwheel/shardwheel/shard"
)

// Plan is the schedule of a series whose runs are not a fixed period
// apart: a calendar, a cron-like rule, a backoff. Next returns the point
// of the run after the one planned for prev: for the first run, prev is
// the time of the OnPlan call; after that, the point the run that just
// returned was planned for (not when it ran: the very time Next returned
// for it, or the point a Reset set). A series runs at each point, never
// earlier, and within about a tick after on a shard that keeps up; but a
// point more than MaxDelay after the run that asked for it is brought in
// to MaxDelay, as AfterFunc clamps its delay (MaxDelay is 2^36 ticks up
// to a 33ms tick: about 2.2 years at the default tick, 8 days at 10µs).
//
// Next is called once on OnPlan's caller, for the first point, and then
// on the goroutine that ran the series' task, right after the task
// returned (or panicked), never on a shard's goroutine and never
// concurrently with the series' own runs; not once Stop has begun. A
// point not after the run's end runs at the next tick (prev is still that
// point, unless it lies more than MaxDelay back). The zero Time ends the
// series, as a Cancel would (Stats count it cancelled). A Next that
// panics ends the series too, and its panic goes to the panic handler
// (WithPanicHandler) and counts in Stats' Panics, as a task's, besides
// the task's own if both panicked.
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
// task returns ErrNilTask. OnPlan allocates nothing in steady state: the
// series' record is its node's, as for Every, and its plan's state is
// reused from an ended plan (up to 4096 ended plans' states wait for
// reuse; the garbage collector takes the others).
func (s *Scheduler) OnPlan(plan Plan, task func(), opts ...TimerOption) (Timer, error) {
	if task == nil {
		return Timer{}, ErrNilTask
	}
	s.mustBeNew()
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
	sh := s.seriesShard(sp)
	now := s.clock.Now()
	first := plan.Next(sh.Instant(now))
	if first.IsZero() {
		return Timer{}, fmt.Errorf("%w: OnPlan: the plan has no first point (Next returned the zero Time)", ErrInvalidOption)
	}
	st := reusePlanState()
	st.s, st.plan, st.task, st.sh = s, plan, task, sh
	// The delay to the first point, within ±MaxDelay so that it cannot
	// overflow: Schedule runs a point passed at the next tick and brings
	// a farther one in.
	delay, limit := time.Duration(0), s.MaxDelay()
	switch at := sh.Reading(first); {
	case at < now-limit:
		delay = -limit
	case at > now+limit:
		delay = limit
	default:
		delay = at - now
	}
	r := shard.Request{Key: sp.key, Now: now, Delay: delay, Task: shard.Task{Func: st.runTask}, Plan: &st.points}
	t, err := s.scheduleOn(sh, &r)
	if err != nil {
		// Not put back: a Schedule that raced Stop may have published a
		// node that names st, and whoever frees it puts st back.
		return Timer{}, err
	}
	// Until the handle is stored the series cannot end but by Stop, whose
	// series are never freed: st is not reused before.
	st.self = t
	st.hasSelf.Store(true)
	if st.ended.Load() { // its first run's plan ended it before the handle was stored
		t.Cancel()
	}
	return t, nil
}

// planState is a plan's series' side of its runs: its task, wrapped so
// that the plan's next point is chosen on the run's goroutine, and the
// points it shares with the shard (pool.Plan).
//
// Ownership: s, plan, task and sh are immutable while the series lives;
// points is the shard's and the runs' (see pool.Plan); self is written
// once by OnPlan before it sets hasSelf, and read only after hasSelf is
// seen set; ended is set once by the run whose plan ended the series:
// whichever of hasSelf and ended is set second sees the other
// (sequentially consistent atomics) and cancels the series.
//
// A planState is reused (reusePlanState) once the series' node is freed
// (points.Freed): then no run is left, and neither the node nor its
// record names the state any more. A series Stop returned is never freed:
// its Timer.Task may call run at any time after.
type planState struct {
	s       *Scheduler
	plan    Plan
	task    func()
	sh      *shard.Shard
	points  pool.Plan
	self    Timer
	hasSelf atomic.Bool
	ended   atomic.Bool
	runTask func() // run, bound once: a method value allocates
	// nextFree links the states on freedPlans: written by freed before
	// its push, and by reusePlanState after the swap that takes it.
	nextFree *planState
}

// Ended plans' states: freed pushes them on freedPlans, a lock-free
// stack, for it may run on a goroutine pinned to its P (a holder freeing
// the node), which must not block; OnPlan, which may, moves them in one
// swap into planStates, a sync.Pool, which it takes them from. The stack
// holds at most maxFreedPlans states (freedCount, which counts a push
// before it and a swap's states after it, so that it is never below the
// stack's size): a garbage collection cannot take what the stack holds,
// and a spike of plans should not stay there; the states beyond are left
// to the collector.
const maxFreedPlans = 4096

var (
	planStates sync.Pool
	freedPlans atomic.Pointer[planState]
	freedCount atomic.Int64
)

// reusePlanState returns a planState for OnPlan: an ended plan's, or a
// new one.
func reusePlanState() *planState {
	if st, ok := planStates.Get().(*planState); ok {
		return st
	}
	if st := takeFreedPlans(); st != nil {
		return st
	}
	return newPlanState()
}

// takeFreedPlans empties freedPlans into planStates, but for one state,
// which it returns (nil if the stack was empty).
func takeFreedPlans() *planState {
	st := freedPlans.Swap(nil)
	if st == nil {
		return nil
	}
	n := int64(1)
	for o := st.nextFree; o != nil; n++ {
		next := o.nextFree
		o.nextFree = nil
		planStates.Put(o)
		o = next
	}
	freedCount.Add(-n)
	st.nextFree = nil
	return st
}

// newPlanState makes a planState, its methods bound once.
func newPlanState() *planState {
	st := new(planState)
	st.runTask, st.points.Freed = st.run, st.freed
	return st
}

// freed makes st ready for another series and pushes it on freedPlans,
// unless that holds maxFreedPlans already: its series' node has been
// freed.
func (st *planState) freed() {
	st.s, st.plan, st.task, st.sh, st.self = nil, nil, nil, nil, Timer{}
	st.points.Served.Store(0)
	st.points.Next.Store(0)
	st.points.Chosen.Store(false)
	st.hasSelf.Store(false)
	st.ended.Store(false)
	if freedCount.Add(1) > maxFreedPlans {
		freedCount.Add(-1)
		return // the collector's
	}
	for {
		head := freedPlans.Load()
		st.nextFree = head
		if freedPlans.CompareAndSwap(head, st) { // pushes only: no ABA
			return
		}
	}
}

// run is the series' task: the caller's, then the plan's next point, even
// if the task panics or ends its goroutine.
func (st *planState) run() {
	defer st.choose()
	st.task()
}

// choose asks the plan for the point after the one the run served, and
// leaves it for the shard, or ends the series on the zero Time or a
// panic, which it reports itself: recovered here, it neither replaces
// the task's own panic nor is lost to a task's runtime.Goexit. Once Stop
// has begun, the series runs no more (Timer.Task of a series Stop
// returned calls the task alone).
func (st *planState) choose() {
	if st.s.stopping.Load() {
		return
	}
	next, ok := st.next()
	if !ok {
		return // ended
	}
	if next.IsZero() {
		st.end()
		return
	}
	st.points.Next.Store(int64(st.sh.Reading(next)))
	st.points.Chosen.Store(true)
}

// next is the plan's next point, and false if Next panicked, which it
// reports, or ended its goroutine (the run reports that): either ends the
// series.
func (st *planState) next() (next time.Time, ok bool) {
	defer func() {
		if !ok {
			if v := recover(); v != nil {
				st.sh.Report(v)
			}
			st.end()
		}
	}()
	next = st.plan.Next(st.sh.Instant(time.Duration(st.points.Served.Load())))
	return next, true
}

// end ends the series from its run: by its handle, or, if OnPlan has not
// stored it yet, by OnPlan once it has.
func (st *planState) end() {
	st.ended.Store(true)
	if st.hasSelf.Load() {
		st.self.Cancel()
	}
}
