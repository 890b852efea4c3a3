// Package shardwheel is a sharded, lock-free timer scheduler for programs
// that keep millions of timeouts: proxies, RPC clients, connection pools.
//
// It keeps the semantics of Netty's HashedWheelTimer (a tick, a wheel of
// buckets, new timeouts queued to the wheel's thread and moved into buckets
// at most TransferCap per tick, a cancel path, unprocessed timeouts returned
// on stop, a pending limit) and removes its single-thread ceiling: a
// Scheduler runs N independent wheels (shards), one goroutine each. A key
// hash routes every Schedule to a shard, and the returned Timeout remembers
// its shard, so Cancel and Reset never touch another shard.
//
// # Two kinds of timers
//
// Schedule and AfterFunc make plain timers: the key only picks the shard,
// keys need not be unique, and the Timeout handle is the only way to cancel
// or reset the timer. ScheduleKey makes an indexed timer: the shard the key
// routes to also indexes it by key, at most one per key, so that CancelKey,
// ResetKey and Lookup reach it by key alone (a multiplexed client that
// learns of a response by its request id needs no map of its own), and
// ScheduleKey on a key replaces the key's pending indexed timer. Keyed
// calls never see plain timers. Both kinds have the same handles and
// guarantees, and Stop returns both.
//
// # Guarantees
//
//   - Never early: a task runs no earlier than the moment Schedule (or
//     Reset) was called plus its delay, on the monotonic clock.
//   - Bounded lateness: a task runs less than a tick after its deadline
//     (deadlines round up to the tick grid) plus its shard's tick lag, which
//     is near zero unless the shard's goroutine waits for a CPU or runs long
//     tasks; Stats shows it.
//   - Exactly once: every timer Schedule accepted ends in exactly one way:
//     its task ran once, one Cancel returned true for it, or Stop claimed
//     it (returned it, or handed it over, or, for a series whose run an
//     executor holds, left that run as its last: see Stop). Pending counts
//     the timers that have not ended yet.
//   - Stale handles are inert: once a timer has ended, its Timeout reports
//     not pending, and Cancel and Reset on it return false, even after the
//     node behind it was reused for another timer.
//   - delay <= 0 runs at the first tick at or after the call (the next
//     tick, unless the call falls exactly on a tick's start); a delay
//     beyond MaxDelay is clamped to MaxDelay (795 days at a 1ms tick, 21.8
//     years at 10ms).
//   - A panicking task is recovered and reported to the panic handler; its
//     shard keeps running. So does the shard of a task that calls
//     runtime.Goexit (reported as ErrTaskGoexit).
//
// # Contexts
//
// WithTimeout, WithDeadline and their Cause variants are the context
// package's functions of the same names with the deadline kept in the
// wheel: a one-line swap for a proxy's or an RPC client's per-request
// deadline, at two allocations and no goroutine per context. A deadline is
// never lost: where the wheel cannot hold it the context package's own
// function takes over, and Stop hands the timers of live contexts to the
// runtime's timers.
//
// # Cost
//
// Schedule, Cancel and Reset are lock-free and allocate nothing in steady
// state (the caller's closure aside): nodes live in per-shard pools,
// pointer-free so that the garbage collector skips them. A Handler, a task
// registered once and called with each timer's key, removes the closure
// too: such a timer is its node alone. AfterFunc files a timer in the
// wheel of the caller's P, taking that wheel with one compare-and-swap, so
// that a timer set and cancelled on one goroutine usually stays on its
// core; Cancel is one compare-and-swap on the timer's node, whichever P
// calls it. A timer routed by key to another P's wheel crosses cores
// through that wheel's queue, which costs about as much CPU as
// time.AfterFunc. A tick costs work only for timers that are due: each
// shard is a hierarchical wheel, and an idle shard sleeps until its next
// due slot, or parks when it has none.
package shardwheel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/shard"
)

var (
	// ErrStopped is returned by Schedule, AfterFunc and ScheduleKey after Stop.
	ErrStopped = errors.New("shardwheel: scheduler stopped")
	// ErrTooManyPending is returned by Schedule, AfterFunc and ScheduleKey when the
	// limit set by WithMaxPending is reached, or wrapped when a shard holds
	// its capacity of ShardCapacity timers.
	ErrTooManyPending = errors.New("shardwheel: too many pending timers")
	// ErrNilTask is returned by Schedule, AfterFunc and ScheduleKey for a
	// nil task, by NewHandler for a nil function, and by the zero
	// Handler's methods.
	ErrNilTask = errors.New("shardwheel: nil task")
	// ErrTooManyHandlers is returned by NewHandler when the Scheduler
	// holds MaxHandlers handlers already.
	ErrTooManyHandlers = fmt.Errorf("shardwheel: a Scheduler holds at most %d handlers", MaxHandlers)
	// ErrTaskGoexit is the value the panic handler (WithPanicHandler, or
	// the logger) receives for a task that called runtime.Goexit instead
	// of returning, as t.FailNow does in a test's timer: the task's shard
	// goes on running its other timers, and Stats counts it in Panics.
	ErrTaskGoexit = shard.ErrGoexit

	errShardFull = fmt.Errorf("%w: the shard holds %d timers, its capacity", ErrTooManyPending, ShardCapacity)
)

// ShardCapacity is the most timers one shard can hold at once, whatever
// WithMaxPending says: 2^26-1 (67,108,863), since a shard names its timer
// nodes by 26-bit indices and keeps index 0 for "none".
const ShardCapacity = 1<<26 - 1

// Scheduler runs timers on a set of shards. It must be created with New:
// Schedule, AfterFunc, the keyed calls, ShardOf, MaxDelay, the context
// functions (WithTimeout and its kin), Stop and Shutdown on a zero
// Scheduler panic with "shardwheel: use New to create a Scheduler". All
// its methods are safe for concurrent use, including from tasks, and none
// of them waits for a shard to make progress, except Stop and Shutdown,
// which wait as they document.
type Scheduler struct {
	// Immutable after New.
	shards   []*shard.Shard
	local    []*shard.Shard // by P id modulo its length: the shard of each P
	index    []keyIndex     // per shard (see keyed.go)
	tick     time.Duration
	limit    int64          // WithMaxPending, 0 for none
	handlers shard.Handlers // shared by the shards (see handler.go); Add locks
	// errLimit is ErrTooManyPending wrapped with the limit, made once so
	// that a rejection at the limit allocates nothing.
	errLimit error
	// clock is the clock every shard shares, epoch the time its reading 0
	// stands for and skew the uncertainty of that (shard.NewClock):
	// contexts (context.go) turn their deadlines into readings with them,
	// and shard.Shard.Time turns readings back into times.
	clock    shard.Clock
	epoch    time.Time
	skew     time.Duration
	bubbled  bool // made inside a testing/synctest bubble: its clock is the bubble's
	stopping atomic.Bool
	stopped  chan struct{} // closed when the first Stop has drained
	// dry is set while no shard has a spare pending token (see
	// shard/quota.go): read by rejected Schedules and by every token
	// given back, written only as the limit is reached and left, so it
	// stays apart from the lines written on every call.
	_   [pad.CacheLineSize]byte
	dry atomic.Bool
	_   [pad.CacheLineSize - 1]byte
}

// errZero is the panic of a method called on a Scheduler not made by New.
const errZero = "shardwheel: use New to create a Scheduler"

func (s *Scheduler) mustBeNew() {
	if len(s.shards) == 0 {
		panic(errZero)
	}
}

// New starts a Scheduler with the given options. It fails, with an error
// that wraps ErrInvalidOption and names the option and value, if an option
// is invalid.
func New(opts ...Option) (*Scheduler, error) {
	c := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, invalid("Option", "nil", "options must not be nil")
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if err := c.checkMemory(); err != nil {
		return nil, err
	}
	clock, epoch, skew := shard.NewClock()
	s := &Scheduler{
		shards:  make([]*shard.Shard, c.shards),
		index:   make([]keyIndex, c.shards),
		tick:    c.tick,
		limit:   int64(c.maxPending),
		clock:   clock,
		epoch:   epoch,
		skew:    skew,
		bubbled: shard.InBubble(epoch),
		stopped: make(chan struct{}),
	}
	// Pending tokens, with a limit, are split between the shards and move
	// between them (Shard.TakeTokens) only when one runs out, so the limit
	// needs no global counter.
	s.errLimit = fmt.Errorf("%w: the WithMaxPending(%d) limit is reached", ErrTooManyPending, c.maxPending)
	n := int64(c.shards)
	procs := runtime.GOMAXPROCS(0)
	// Routed timers cross between the shards (shard/cross.go).
	group := &shard.Group{Shards: s.shards, Route: s.route, Origin: clock.Now()}
	for i := range s.shards {
		q := s.limit / n
		if int64(i) < s.limit%n {
			q++
		}
		s.index[i] = newKeyIndex()
		cfg := c.shardConfig(q)
		cfg.Limited = s.limit > 0
		cfg.ID, cfg.Shards, cfg.Home = i, c.shards, i%procs
		cfg.Clock, cfg.Epoch, cfg.Skew = clock, epoch, skew
		cfg.Dry = &s.dry
		cfg.Handlers = &s.handlers
		cfg.Group = group
		// An indexed timer is filed on the shard it was scheduled on;
		// its entry is in the index of the shard its key routes to.
		cfg.Unindex = func(key uint64, r shard.Ref) { s.index[s.route(key)].unindex(key, r) }
		if c.affinity {
			cfg.Pin, cfg.OnPinError = pinner(i, c.log)
		}
		sh, err := shard.New(cfg)
		if err != nil {
			return nil, err // unreachable: the options were validated
		}
		s.shards[i] = sh
	}
	// P p files its timers without a key on shard p modulo the shards
	// (a P beyond GOMAXPROCS at New, after a raise, wraps round too).
	s.local = make([]*shard.Shard, max(procs, len(s.shards)))
	for p := range s.local {
		s.local[p] = s.shards[p%len(s.shards)]
	}
	for _, sh := range s.shards {
		sh.Start()
	}
	countLive(1, c.log())
	return s, nil
}

// WarnSchedulers is the number of live Schedulers (made by New and not yet
// stopped) beyond which New logs one warning (see WithLogger), once per
// process, as Netty's HashedWheelTimer does beyond 64 instances. Each
// Scheduler runs a goroutine per shard and is meant to be shared: one per
// connection or per request is a misuse that this warning catches.
const WarnSchedulers = 64

var (
	liveSchedulers atomic.Int64 // New adds one, the first Stop takes it away
	warnedLive     atomic.Bool  // set by the one New that warns (CAS)
)

// countLive adds d to the live Schedulers and warns, once, to log, when
// there are more than WarnSchedulers.
func countLive(d int64, log *slog.Logger) {
	if n := liveSchedulers.Add(d); n > WarnSchedulers && warnedLive.CompareAndSwap(false, true) {
		log.Warn("shardwheel: too many live Schedulers; share one Scheduler instead of creating one per connection or request",
			"live", n, "limit", WarnSchedulers)
	}
}

// Shards returns the number of shards.
func (s *Scheduler) Shards() int { return len(s.shards) }

// Tick returns the tick duration.
func (s *Scheduler) Tick() time.Duration { return s.tick }

// MaxDelay returns the longest delay honoured as given; Schedule and Reset
// clamp longer delays to it.
func (s *Scheduler) MaxDelay() time.Duration {
	s.mustBeNew()
	return s.shards[0].MaxDelay()
}

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

// Schedule runs task once, delay from now, on the shard that key routes to,
// and returns a handle to the timer. Timers with equal keys share a shard;
// keys need not be unique. A timer that needs no key (a request timeout)
// is cheaper through AfterFunc, which files it on the calling goroutine's
// own shard. delay <= 0 runs task at the first tick at or after the call,
// normally the next, and a delay beyond MaxDelay is clamped.
//
// It returns ErrNilTask for a nil task, ErrStopped after Stop, and
// ErrTooManyPending at the WithMaxPending limit (or, wrapped, when the
// shard holds ShardCapacity timers); a rejected call leaves no trace, in
// Stats too. Schedule never blocks: it does not wait for any shard, so it
// is safe to call from a task however many timers the task schedules. It
// is lock-free and, in steady state, allocates nothing.
//
// Three relatives cover what Schedule does not:
//
//   - Every runs a task periodically on a drift-free grid, with one node
//     for the whole series and a policy (SkipMissed, BurstMissed,
//     DelayMissed) for grid points missed while the shard was behind, so
//     that a heartbeat need not re-arm itself in its task.
//   - ScheduleWithin lets a timer run up to slack late, and files it
//     where it costs the wheel least: no cascade, wake-ups shared with
//     other timers with slack; timers without slack keep their precision.
//   - Timeout.CancelWait is Cancel that, when the task has started,
//     waits until it has returned (with WithExecutor too), unless it is
//     called from inside that task.
func (s *Scheduler) Schedule(key uint64, delay time.Duration, task func()) (Timeout, error) {
	if task == nil {
		return Timeout{}, ErrNilTask
	}
	return s.scheduleRouted(key, delay, shard.Task{Func: task})
}

// scheduleRouted schedules a timer that runs on key's shard, filed on the
// caller's.
func (s *Scheduler) scheduleRouted(key uint64, delay time.Duration, task shard.Task) (Timeout, error) {
	sh := s.localShard()
	r := s.request(key, delay, task)
	r.Routed = true
	return s.scheduleOn(sh, &r)
}

// AfterFunc runs task once, delay from now, on the shard of the P the
// caller runs on, and returns a handle to the timer: Schedule without a
// key, for timers that need none (request timeouts, idle timers). The
// timer's whole life then usually stays on the caller's CPU, which makes
// it the cheapest way to schedule; its Key is 0. Delays, errors and
// guarantees are Schedule's.
func (s *Scheduler) AfterFunc(delay time.Duration, task func()) (Timeout, error) {
	if task == nil {
		return Timeout{}, ErrNilTask
	}
	sh := s.localShard()
	r := s.request(0, delay, shard.Task{Func: task})
	return s.scheduleOn(sh, &r)
}

// request describes a timer due delay from now.
func (s *Scheduler) request(key uint64, delay time.Duration, task shard.Task) shard.Request {
	return shard.Request{Key: key, Now: s.clock.Now(), Delay: delay, Task: task}
}

// localShard returns the shard of the P the caller runs on.
func (s *Scheduler) localShard() *shard.Shard {
	s.mustBeNew()
	if p := shard.CurrentP(); p < len(s.local) {
		return s.local[p]
	} else {
		return s.shards[p%len(s.shards)]
	}
}

// scheduleOn schedules r on sh, borrowing pending tokens from other shards
// and trying again while sh reports none.
func (s *Scheduler) scheduleOn(sh *shard.Shard, r *shard.Request) (Timeout, error) {
	if sh.Closed() {
		return Timeout{}, ErrStopped
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
		return Timeout{sh: sh, ref: ref, key: r.Key}, nil
	case shard.NoTokens:
		return Timeout{}, s.errLimit
	case shard.ArenaFull:
		return Timeout{}, errShardFull
	default:
		return Timeout{}, ErrStopped
	}
}

// borrowTokens moves pending tokens from another shard into sh. It runs
// only when sh's own share is used up, i.e. near the WithMaxPending limit.
// When no shard has any it marks the scheduler dry, so that later
// rejections cost O(1), then looks once more (see shard/quota.go for why).
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
// cancelled or returned by Stop). While timers are being scheduled and
// cancelled concurrently it is a snapshot, exact when the scheduler is
// quiescent. A timer whose task is running no longer counts.
func (s *Scheduler) Pending() int {
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

// Stop stops every shard, waits for their goroutines to return, and returns
// the timers that had not ended, plain and indexed: they never run, their
// handles report not pending, and Timeout.Task gives back their tasks, so
// that their work can be handed elsewhere. It empties the key index, so
// keyed calls find nothing afterwards. After Stop, Schedule and ScheduleKey
// return ErrStopped.
//
// Timers whose task is the CancelFunc of a context from WithTimeout,
// WithDeadline or their Cause variants (the context's own timer among
// them) are not returned: Stop hands each to a timer of package time that
// calls it at the timer's deadline, so that a context made before Stop
// still expires at its deadline. Stats counts them as stopped.
//
// What Stop waits for: each shard goroutine to return. With the default
// inline executor that includes any task running when Stop is called, so
// every task has returned when Stop does. With WithExecutor it includes
// the executor's run calls in progress, but not tasks the executor runs
// asynchronously: wait for those with the executor's own means. A
// panicking task or executor is recovered by its shard and reported to the
// panic handler; an executor that runs tasks on other goroutines must
// recover their panics itself. Shutdown is Stop with a bound on this wait.
//
// A periodic series (Every) is returned between its runs. With
// WithExecutor, a series whose run the executor holds when Stop claims it
// (handed over, its task started or not) is not returned: that run, which
// may start after Stop returns, is its last, and Stats counts the series
// as stopped. So what Stop returns never runs twice: a returned series'
// Task is not also in the executor's hands. (Inline, a run in progress
// has returned by the time Stop does, unless the task called Stop itself
// or Shutdown gave up on it.)
//
// Stop is idempotent: only the first call returns timers; a later call
// waits until the first is completely done (every shard goroutine has
// returned, including one whose task called Stop and is still running) and
// returns nil.
//
// Called from inside a task running on a shard goroutine (the default
// executor), Stop does not wait for that shard, which would deadlock: it
// claims the pending timers of every shard, including those due in the
// same tick as the calling task, waits for the other shards, and returns;
// the calling shard's goroutine exits as soon as the task returns. A later
// Stop called from a task returns nil at once, without waiting: the first
// Stop may be waiting for that very task. With WithExecutor, Stop waits
// for every shard, so an executor that blocks a shard until a task that
// calls Stop returns will deadlock.
func (s *Scheduler) Stop() []Timeout {
	out, _ := s.Shutdown(context.Background())
	return out
}

// Shutdown is Stop that stops waiting when ctx is done: it then returns
// ctx.Err() instead of hanging on a task that never returns. Either way
// the first call claims every pending timer, returns it (or hands it over,
// as Stop does), and makes Schedule return ErrStopped; a nil error means
// every shard goroutine has returned, as after Stop. When ctx is done
// first, tasks that were running may still be running, and their shard
// goroutines exit when they return. The error is ctx.Err() whenever ctx is
// done before every shard goroutine has returned, even if ctx was done
// already when Shutdown was called. A later call, or Stop, waits (bounded
// by its own ctx) for those goroutines, and returns no timers.
func (s *Scheduler) Shutdown(ctx context.Context) ([]Timeout, error) {
	s.mustBeNew()
	gid := shard.GoroutineID()
	if !s.stopping.CompareAndSwap(false, true) {
		if s.onWorker(gid) {
			return nil, nil
		}
		err := wait(ctx, s.stopped)
		for _, sh := range s.shards {
			if err == nil {
				err = wait(ctx, sh.Exited())
			}
		}
		return nil, err
	}
	for _, sh := range s.shards {
		sh.Close()
	}
	var err error
	for _, sh := range s.shards {
		if sh.IsWorker(gid) {
			continue // quiet: it is running the task that called us
		}
		if err == nil {
			err = wait(ctx, sh.Exited())
		}
		if err != nil {
			// Giving up on a worker still busy: Drain may run beside
			// it once it touches no node again, which it reaches
			// without waiting for any task (see shard.Quiet).
			if quiet, ch := sh.Quiet(); !quiet {
				select {
				case <-ch:
				case <-sh.Exited():
				}
			}
		}
	}
	var out []Timeout
	for _, sh := range s.shards {
		sh.Drain(func(r shard.Ref, key uint64, due time.Duration, task shard.Task) bool {
			if s.handOver(sh, task, due) {
				return false // not returned: Task reports nil, as documented
			}
			out = append(out, Timeout{sh: sh, ref: r, key: key})
			return true
		})
	}
	// Every indexed timer has ended: drop the index. A ScheduleKey racing
	// with Stop that stores its entry after this sees its timer ended and
	// deletes the entry itself.
	for i := range s.index {
		s.index[i].m.Clear()
	}
	close(s.stopped)
	countLive(-1, nil)
	return out, err
}

// wait waits until ch is closed or ctx is done, and returns ctx.Err() in
// the second case. A closed ch wins over a done ctx.
func wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	default:
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Scheduler) onWorker(gid uint64) bool {
	for _, sh := range s.shards {
		if sh.IsWorker(gid) {
			return true
		}
	}
	return false
}

// Timeout is a handle to one scheduled timer. It is a small value: copy it
// freely. Its zero value is valid and names no timer: Cancel and Reset
// return false, Pending false, Key 0 and Deadline the zero Time.
type Timeout struct {
	sh  *shard.Shard
	ref shard.Ref
	key uint64
}

// Cancel stops the timer from running and reports whether this call did so:
// true at most once per timer, and never after its task started, it was
// cancelled, or Stop returned it. On a periodic timer (Every) it ends the
// series: true iff the series was still live; a run in progress finishes,
// and none starts after it (CancelWait also waits for that run). Cancel is
// lock-free and O(1): it marks the timer cancelled and drops its task, so
// that the closure can be collected at once. The timer's node (its 32 bytes) stays in the wheel
// until the wheel meets it or a sweep frees it (Stats.HeldCancelled); a
// Cancel on the wheel's own P of the timer filed last there, not from
// ScheduleKey, frees it at once (Stats.TakenBack). An indexed timer (from
// ScheduleKey) cancelled this way is no longer its key's: CancelKey,
// ResetKey and Lookup no longer find it, and the shard drops its index
// entry when it frees the node.
func (t Timeout) Cancel() bool {
	return t.sh != nil && t.sh.Cancel(t.ref)
}

// Reset moves the timer's deadline to delay from now (clamped like
// Schedule's) and reports whether the timer was still pending, in which case
// it now runs at the new deadline and not at the old one. If Reset returns
// false the timer has ended (possibly by running at its old deadline, with
// which Reset raced) and nothing changes. Moving a deadline later costs one
// atomic compare-and-swap and allocates nothing.
//
// On a periodic timer (Every) Reset restarts the series' grid from the
// call with period delay: its next run is delay from now, then every
// delay (it allocates the new grid, 24 bytes). A delay <= 0 is refused,
// as Every refuses it: Reset returns false and the series goes on
// unchanged. A timer from ScheduleWithin becomes exact: it runs at the new
// deadline.
func (t Timeout) Reset(delay time.Duration) bool {
	return t.sh != nil && t.sh.Reset(t.ref, t.key, delay)
}

// Pending reports whether the timer has not yet ended: for a periodic
// timer, whether the series lives (during its runs too).
func (t Timeout) Pending() bool {
	return t.sh != nil && t.sh.Pending(t.ref)
}

// Task returns the task of a timer that Stop or Shutdown returned, so that
// its work can be handed elsewhere (or run: calling it does not revive the
// timer, which never runs). For a periodic series it is the series' task,
// which the scheduler runs no more: with WithExecutor, Stop returns no
// series whose run the executor still holds, so calling it never
// duplicates such a run (see Stop). For every other timer (pending, ended in any
// other way) and for the zero Timeout it returns nil: a shard drops a task
// when its timer ends. A stopped Scheduler keeps the tasks of the timers
// Stop returned, for Task, for as long as the Scheduler or a Timeout of it
// is reachable.
func (t Timeout) Task() func() {
	if t.sh == nil {
		return nil
	}
	return t.sh.Func(t.sh.Claimed(t.ref), t.key)
}

// Key returns the key the timer was scheduled with.
func (t Timeout) Key() uint64 { return t.key }

// Deadline returns when the timer is due, or the zero Time if it has ended.
// The deadline is on the tick grid, so it may be up to a tick after
// schedule time plus delay. Until the shard has picked up a new timer
// (normally within one tick) Deadline reports the earliest time it can run.
func (t Timeout) Deadline() time.Time {
	if t.sh == nil {
		return time.Time{}
	}
	d, ok := t.sh.Deadline(t.ref)
	if !ok {
		return time.Time{}
	}
	return t.sh.Time(d)
}
