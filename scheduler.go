package shardwheel

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/shard"
)

var (
	// ErrStopped is returned by AfterFunc and Every (the Scheduler's, a
	// Handler's, an Index's), and by NewHandler, after Stop (or Shutdown).
	ErrStopped = errors.New("shardwheel: scheduler stopped")
	// ErrTooManyPending is returned by AfterFunc and Every when the
	// limit set by WithMaxPending is reached, or wrapped when a shard holds
	// its capacity of ShardCapacity timers.
	ErrTooManyPending = errors.New("shardwheel: too many pending timers")
	// ErrNilTask is returned by AfterFunc and Every for a
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
// every method of a zero Scheduler panics with "shardwheel: use New to
// create a Scheduler", except Shards, Tick, Pending and Stats, which
// report an empty scheduler, and every method of a nil *Scheduler panics
// so, those four included. (A call with a nil task returns ErrNilTask
// before it looks at the Scheduler.) All its methods are safe for
// concurrent use, including from tasks, and none of them waits for a shard
// to make progress, except Stop and Shutdown, which wait as they document.
type Scheduler struct {
	// Immutable after New.
	shards   []*shard.Shard
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
	// indexes lists the Indexes of s (index.go), for the shard goroutines'
	// unindex and for Stop; NewIndex, under indexMu, stores a new list
	// with one more, so readers load it without a lock.
	indexes atomic.Pointer[[]indexer]
	indexMu sync.Mutex
	// dry is set while no shard has a spare pending token (see
	// shard/tokens.go): read by rejected Schedules and by every token
	// given back, written only as the limit is reached and left, so it
	// stays apart from the lines written on every call.
	_   [pad.CacheLineSize]byte
	dry atomic.Bool
	_   [pad.CacheLineSize - 1]byte
	// blocked counts the runners left behind a blocked task, for all
	// shards (shard/blocked.go); warnedRefused is set by the first look the
	// bound refused, which logs.
	blocked       atomic.Int64
	warnedRefused atomic.Bool
}

// errZero is the panic of a method called on a Scheduler not made by New:
// a zero Scheduler, or a nil *Scheduler.
const errZero = "shardwheel: use New to create a Scheduler"

// mustBeNew panics with errZero unless New made s.
func (s *Scheduler) mustBeNew() {
	if s == nil || len(s.shards) == 0 {
		panic(errZero)
	}
}

// mustNotBeNil panics with errZero if s is nil: the read-only accessors
// report an empty scheduler for a zero Scheduler, but have nothing to read
// in a nil one.
func (s *Scheduler) mustNotBeNil() {
	if s == nil {
		panic(errZero)
	}
}

// New starts a Scheduler with the given options. It fails, with an error
// that wraps ErrInvalidOption and names the option and value, if an option
// is invalid. A Scheduler runs a goroutine per shard and is meant to be
// shared: beyond 64 live ones (made by New and not yet stopped), New logs
// one warning per process (see WithLogger), as Netty's HashedWheelTimer
// does beyond 64 instances.
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
	if err := c.checkBlocked(); err != nil {
		return nil, err
	}
	if err := c.checkMemory(); err != nil {
		return nil, err
	}
	clock, epoch, skew := shard.NewClock()
	s := &Scheduler{
		shards:  make([]*shard.Shard, c.shards),
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
		cfg := c.shardConfig(q)
		cfg.Limited = s.limit > 0
		cfg.ID, cfg.Shards, cfg.Home = i, c.shards, i%procs
		cfg.Clock, cfg.Epoch, cfg.Skew = clock, epoch, skew
		cfg.Dry = &s.dry
		cfg.Handlers = &s.handlers
		cfg.Blocked = &s.blocked
		cfg.OnRefused = func() {
			if s.warnedRefused.CompareAndSwap(false, true) {
				c.log().Warn("shardwheel: a task has held up the tasks behind it longer than WithBlockedAfter, but WithMaxBlockedTasks tasks are blocked already: they wait for it (Stats: BlockedRefused)",
					"max_blocked_tasks", c.maxBlocked)
			}
		}
		cfg.Group = group
		cfg.Unindex = s.unindex
		if c.affinity {
			cfg.Pin, cfg.OnPinError = pinner(i, c.log)
		}
		sh, err := shard.New(cfg)
		if err != nil {
			return nil, err // unreachable: the options were validated
		}
		s.shards[i] = sh
	}
	for _, sh := range s.shards {
		sh.Start()
	}
	countLive(1, c.log())
	return s, nil
}

// warnSchedulers is the number of live Schedulers (made by New and not yet
// stopped) beyond which New logs one warning (see WithLogger), once per
// process, as Netty's HashedWheelTimer does beyond 64 instances. Each
// Scheduler runs a goroutine per shard and is meant to be shared: one per
// connection or per request is a misuse that this warning catches.
const warnSchedulers = 64

var (
	liveSchedulers atomic.Int64 // New adds one, the first Stop takes it away
	warnedLive     atomic.Bool  // set by the one New that warns (CAS)
)

// countLive adds d to the live Schedulers and warns, once, to log, when
// there are more than warnSchedulers.
func countLive(d int64, log *slog.Logger) {
	if n := liveSchedulers.Add(d); n > warnSchedulers && warnedLive.CompareAndSwap(false, true) {
		log.Warn("shardwheel: too many live Schedulers; share one Scheduler instead of creating one per connection or request",
			"live", n, "limit", warnSchedulers)
	}
}

// Shards returns the number of shards.
func (s *Scheduler) Shards() int {
	s.mustNotBeNil()
	return len(s.shards)
}

// Tick returns the tick duration.
func (s *Scheduler) Tick() time.Duration {
	s.mustNotBeNil()
	return s.tick
}

// MaxDelay returns the longest delay honoured as given; AfterFunc and Reset
// clamp longer delays to it.
func (s *Scheduler) MaxDelay() time.Duration {
	s.mustBeNew()
	return s.shards[0].MaxDelay()
}
