package shardwheel

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/shardwheel/shardwheel/pool"
	"github.com/shardwheel/shardwheel/shard"
)

// Defaults and limits of the options. Each limit is enforced by New, which
// fails with an error wrapping ErrInvalidOption that names the option and
// the value.
const (
	// DefaultTick is 1ms: at it a loaded shard runs timers about as
	// close to their deadline as time.AfterFunc does (see BENCHMARKS.md),
	// and a shard costs its wake-ups only while it has timers due soon;
	// an idle one parks.
	DefaultTick = time.Millisecond
	// DefaultWheelSize is 512 slots per level: level 0 then covers 512
	// ticks, so a 1ms wheel holds every timeout under half a second
	// without a cascade, in 6 KiB of slots per level.
	DefaultWheelSize = 512
	// defaultInitialCapacity is the nodes a shard allocates with its first
	// timer (36 KiB); its storage then doubles up to 16,384 nodes and
	// grows by blocks of that size (see WithInitialCapacity).
	defaultInitialCapacity = 1024
	// DefaultTransferCap is Netty's HashedWheelTimer's: it moves at most
	// 100000 new timeouts into its wheel per tick.
	DefaultTransferCap = 100000

	// MinTick is the finest tick: Go's timers and the Linux scheduler
	// wake a sleeping goroutine no more precisely than about a
	// millisecond, so a finer tick would only add wake-ups.
	MinTick = time.Millisecond
	// MaxTick is the coarsest tick.
	MaxTick = time.Hour
	// MaxShards bounds WithShards. Each shard costs a goroutine and its
	// wheel; beyond one per P, shards only add keyed routing targets.
	MaxShards = 4096
	// MaxWheelSize bounds WithWheelSize: 2^16 slots per level is 768 KiB
	// of slots per level and shard.
	MaxWheelSize = 1 << 16
	// maxInitialCapacity bounds WithInitialCapacity: 2^22 nodes (184 MiB with
	// their tasks) is the largest block a shard allocates.
	maxInitialCapacity = 1 << 22
	// defaultBlockedTicks is WithBlockedAfter's default, in ticks: the
	// runs behind a task that has held them up for a tick (1ms at the
	// default tick; noticed within two) go to another runner, so that a
	// task that blocks delays other keys' tasks by about two ticks.
	defaultBlockedTicks = 1
	// defaultMaxBlockedTasks is WithMaxBlockedTasks' default, and
	// MaxBlockedTasks its bound.
	defaultMaxBlockedTasks = 256
	MaxBlockedTasks        = 1 << 20
)

// ErrInvalidOption is wrapped by every error New returns for a bad option.
var ErrInvalidOption = errors.New("shardwheel: invalid option")

// Option configures a Scheduler in New. Options are applied in order; a
// later option overrides an earlier one of the same kind.
type Option func(*config) error

type config struct {
	shards      int
	tick        time.Duration
	wheelSize   int
	firstBlock  int
	transferCap int
	maxPending  int
	executor    func(task func())
	onPanic     func(v any)  // nil: log with logger
	logger      *slog.Logger // nil: slog.Default() at the time of logging
	affinity    bool
	stats       bool
	capacity    int // timers a shard holds; 0: ShardCapacity (tests lower it)
	// blockedAfter is WithBlockedAfter's bound, blockedSet whether it
	// was given (the default follows the tick); maxBlocked is
	// WithMaxBlockedTasks'.
	blockedAfter time.Duration
	blockedSet   bool
	maxBlocked   int
}

func defaultConfig() config {
	return config{
		shards:      runtime.GOMAXPROCS(0),
		tick:        DefaultTick,
		wheelSize:   DefaultWheelSize,
		firstBlock:  defaultInitialCapacity,
		transferCap: DefaultTransferCap,
		stats:       true,
		maxBlocked:  defaultMaxBlockedTasks,
	}
}

func invalid(option string, value any, rule string) error {
	return fmt.Errorf("%w: %s(%v): %s", ErrInvalidOption, option, value, rule)
}

// WithShards sets the number of wheels, each driven by its own goroutine.
// The default is runtime.GOMAXPROCS(0) at the time New is called. n must be
// in [1, MaxShards].
func WithShards(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxShards {
			return invalid("WithShards", n, fmt.Sprintf("must be in [1, %d]", MaxShards))
		}
		c.shards = n
		return nil
	}
}

// WithTick sets the tick duration: the wheel's resolution, and so the
// lateness a timer may see (see the package documentation). The default is
// DefaultTick; d must be in [MinTick, MaxTick].
func WithTick(d time.Duration) Option {
	return func(c *config) error {
		if d < MinTick || d > MaxTick {
			return invalid("WithTick", d, fmt.Sprintf("must be in [%v, %v]", MinTick, MaxTick))
		}
		c.tick = d
		return nil
	}
}

// WithWheelSize sets the slots per wheel level. The default is
// DefaultWheelSize; n must be a power of two in [2, MaxWheelSize] (a wheel
// level has at least 4 slots: 2 builds the wheel of 4). Larger wheels
// cascade less often, in larger batches, and cost more memory per shard
// (12 bytes and one bit per slot per level).
func WithWheelSize(n int) Option {
	return func(c *config) error {
		if n < 2 || n > MaxWheelSize || n&(n-1) != 0 {
			return invalid("WithWheelSize", n, fmt.Sprintf("must be a power of two in [2, %d]", MaxWheelSize))
		}
		c.wheelSize = n
		return nil
	}
}

// WithInitialCapacity sets how many timers a shard's storage holds when it
// first grows: a shard allocates nothing for timers until it gets its
// first one, then a block of n nodes (rounded up to a power of two, at
// least 64; 36 bytes each, plus 8 (4 on 32-bit platforms) once a closure
// timer lands in the block and 2 once a Handler timer does). As it fills,
// it doubles its storage, each new block as large as all before it, until
// it holds 2^14 nodes (16,384) or n rounded up, whichever is larger, then
// grows by blocks of that size, the unit in which it gives memory back. The
// default is 1024; n must be in [1, 2^22] (4,194,304 nodes, 184 MiB with
// their tasks). A larger first block saves a few early allocations for a
// shard that will surely hold many timers.
func WithInitialCapacity(n int) Option {
	return func(c *config) error {
		if n < 1 || n > maxInitialCapacity {
			return invalid("WithInitialCapacity", n, fmt.Sprintf("must be in [1, %d]", maxInitialCapacity))
		}
		c.firstBlock = n
		return nil
	}
}

// WithTransferCap sets how many new timers a shard moves from its queues
// into its wheel per tick. The rest wait in the queues for the next tick
// (those whose deadline passed meanwhile then run at once). The default is
// DefaultTransferCap; n must be at least 1.
func WithTransferCap(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return invalid("WithTransferCap", n, "must be at least 1")
		}
		c.transferCap = n
		return nil
	}
}

// WithMaxPending limits the number of pending timers; beyond it AfterFunc
// and its kin return ErrTooManyPending. 0, the default, means no limit other than
// capacity (64M timers per shard). n must not be negative.
func WithMaxPending(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return invalid("WithMaxPending", n, "must not be negative")
		}
		c.maxPending = n
		return nil
	}
}

// WithExecutor sets where expired tasks run: the shard's runner calls
// run(task) for each one, in deadline order, instead of running it. The
// default runs them on the runner itself, one at a time (see
// WithBlockedAfter for a task that holds up the others). run must not be
// nil, and must call each task it is given exactly once:
// the task it gets tells the shard when the timer's own task has returned
// (for CancelWait, and to run a periodic timer again), so a task that is
// dropped leaves CancelWait waiting (until its context ends) and a
// periodic timer stalled (its Cancel still ends it). Handing a task over
// costs the same however many are in flight, and allocates nothing on
// amd64, arm64 and 386 once the shard has had as many in flight before (a
// burst of more allocates 230-250 bytes for each, its record and tables, which the
// shard gives back within seconds after it); elsewhere it allocates a
// little more, to name the goroutine that runs it (for CancelWait).
func WithExecutor(run func(task func())) Option {
	return func(c *config) error {
		if run == nil {
			return invalid("WithExecutor", "nil", "executor must not be nil")
		}
		c.executor = run
		return nil
	}
}

// WithPanicHandler sets the function called with the value of a task that
// panics (or of an executor that does), and with ErrTaskGoexit for a task
// that calls runtime.Goexit. The runner recovers and runs the next task. The
// default logs the value and stack at error level, to the WithLogger
// logger. h must not be nil. h runs on the goroutine that ran the task
// (the shard's runner, or an executor's goroutine); it should not panic,
// and if it does, its panic is recovered and dropped. If it calls
// runtime.Goexit (t.Fatal in a test's handler), that ends the goroutine it
// runs on, as a task's Goexit would: a new goroutine takes the runner up,
// the value counted and reported once, and a run on an executor's
// goroutine still finishes.
// Panics of tasks that an executor (WithExecutor) runs on other goroutines
// never reach the shard: that executor must recover them.
func WithPanicHandler(h func(v any)) Option {
	return func(c *config) error {
		if h == nil {
			return invalid("WithPanicHandler", "nil", "handler must not be nil")
		}
		c.onPanic = h
		return nil
	}
}

// WithAffinity pins shard i's goroutine to an OS thread bound to one CPU of
// the process's allowed set (round robin), on Linux. Elsewhere it is a
// no-op. A failure to pin is logged (see WithLogger) and the shard runs
// unpinned. Pinned goroutines cost the Go scheduler a thread hand-off on
// every wake-up: leave it off unless go run ./bench compare -affinity (or
// burst -affinity) shows a gain on your host. It is off by default.
func WithAffinity(on bool) Option {
	return func(c *config) error {
		c.affinity = on
		return nil
	}
}

// WithBlockedAfter sets how long a task may hold up the tasks behind it.
// A shard's goroutine never runs a task: it hands each due timer's task,
// in deadline order, to its runner, a goroutine that runs them one at a
// time, so that the tasks of one key (ByKey, an Index's) run one at a
// time, in deadline order. Once a task has
// kept the tasks queued behind it waiting for d (looked at every d: it is
// noticed between d and 2d after it started, and a tick later at most),
// the shard hands them to a new runner, and the old one, once its task
// returns, runs only the blocked task's key's tasks that were queued
// behind it; that key's timers that come due meanwhile are held, pending
// and cancellable, and run when it has, in deadline order. Other keys'
// tasks, timers without a key and series run on. CancelWait on the blocked timer still
// waits for it, and Stop and Shutdown wait for it as for any task. Stats
// count the runners left behind (BlockedRuns) and name the tasks still
// running (Blocked). The default is one tick; d must be 0,
// which never leaves a runner (tasks wait behind a blocked one), or at
// least the tick. See WithMaxBlockedTasks for the bound on the runners
// blocked tasks keep. Nothing here tells a task that blocks from one the
// Go scheduler preempted: with more runnable goroutines than Ps, the runs
// behind a preempted task may move too, at the cost of a goroutine start.
func WithBlockedAfter(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return invalid("WithBlockedAfter", d, "must be 0 (off) or at least the tick")
		}
		c.blockedAfter, c.blockedSet = d, true
		return nil
	}
}

// WithMaxBlockedTasks bounds the runners left behind a blocked task
// (WithBlockedAfter) at once, over all shards: the Scheduler's goroutines
// are at most its shards' goroutines, one current runner per shard, and n.
// Past it the tasks behind a blocked one wait for it, as with
// WithBlockedAfter(0); Stats count each refused look (BlockedRefused), and
// the logger (WithLogger) says so, once. The default is 256; n must be in
// [1, MaxBlockedTasks].
func WithMaxBlockedTasks(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxBlockedTasks {
			return invalid("WithMaxBlockedTasks", n, fmt.Sprintf("must be in [1, %d]", MaxBlockedTasks))
		}
		c.maxBlocked = n
		return nil
	}
}

// WithStats turns the latency histograms of Stats (tick lag, timer lateness,
// pass time, task run time) on or off; they are on by default. They cost one
// clock read per pass and about one per task run, which times the task and
// starts the next (BenchmarkStatsOverhead measures AfterFunc and Cancel with them on
// and off). Counters are kept either way.
func WithStats(on bool) Option {
	return func(c *config) error {
		c.stats = on
		return nil
	}
}

// WithLogger sets where the Scheduler logs: a task's panic (unless
// WithPanicHandler is set), a shard that could not be pinned
// (WithAffinity), and the warning about too many live Schedulers (see
// New). The default, or a nil l, is slog.Default() at the time
// of each message.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return nil
	}
}

// log returns the logger to write to now.
func (c *config) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}

// panicHandler returns the WithPanicHandler handler, or one that logs the
// value and its stack.
func (c *config) panicHandler() func(v any) {
	if c.onPanic != nil {
		return c.onPanic
	}
	return func(v any) {
		msg := "shardwheel: task panicked"
		if v == ErrTaskGoexit {
			msg = "shardwheel: task called runtime.Goexit"
		}
		c.log().Error(msg, "panic", v, "stack", string(debug.Stack()))
	}
}

func (c *config) shardConfig(tokens int64) shard.Config {
	return shard.Config{
		Tick:        c.tick,
		WheelSize:   c.wheelSize,
		FirstBlock:  c.firstBlock,
		TransferCap: c.transferCap,
		Tokens:      tokens,
		Lanes:       runtime.GOMAXPROCS(0),
		Run:         c.executor,
		OnPanic:     c.panicHandler(),
		Stats:       c.stats,
		Capacity:    c.capacity,

		BlockedAfter: c.blockedBound(),
		MaxBlocked:   c.maxBlocked,
	}
}

// blockedBound returns WithBlockedAfter's bound, or its default for the
// tick.
func (c *config) blockedBound() time.Duration {
	if !c.blockedSet {
		return defaultBlockedTicks * c.tick
	}
	return c.blockedAfter
}

// checkBlocked fails if WithBlockedAfter's bound is below the tick: the
// options may come in any order, so New checks it once all are applied.
func (c *config) checkBlocked() error {
	if d := c.blockedBound(); d != 0 && d < c.tick {
		return invalid("WithBlockedAfter", d, fmt.Sprintf("must be 0 (off) or at least the tick (%v)", c.tick))
	}
	return nil
}

// checkMemory fails, naming the options, when the shards' fixed cost plus
// their first blocks of node storage cannot fit in the memory the process
// may use: physical memory where it is known (Linux), and the Go memory
// limit (GOMEMLIMIT, debug.SetMemoryLimit) when one is set.
func (c *config) checkMemory() error {
	lanes := runtime.GOMAXPROCS(0)
	perShard := uint64(shard.Footprint(c.wheelSize, lanes)) + uint64(c.firstBlock)*pool.NodeBytes
	need := uint64(c.shards) * perShard
	avail := uint64(debug.SetMemoryLimit(-1))
	if ram := physicalMemory(); ram > 0 {
		avail = min(avail, ram)
	}
	if need <= avail {
		return nil
	}
	return fmt.Errorf("%w: WithShards(%d), WithWheelSize(%d) and WithInitialCapacity(%d) need %d MiB "+
		"(%d KiB per shard at GOMAXPROCS %d, its first block of timers included), more than the %d MiB "+
		"this process may use", ErrInvalidOption, c.shards, c.wheelSize, c.firstBlock, need>>20,
		perShard>>10, lanes, avail>>20)
}
