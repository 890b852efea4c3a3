package shardwheel

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
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
	// close to their deadline as time.AfterFunc does (README, "Choosing
	// the tick"), and a shard costs its wake-ups only while it has
	// timers due soon; an idle one parks.
	DefaultTick        = time.Millisecond
	DefaultWheelSize   = 512
	DefaultRingSize    = 1024
	DefaultTransferCap = 100000

	MinTick      = time.Millisecond
	MaxTick      = time.Hour
	MaxShards    = 4096
	MaxWheelSize = 1 << 16
	MaxRingSize  = 1 << 22
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
	ringSize    int
	transferCap int
	maxPending  int
	executor    func(task func())
	onPanic     func(v any)
	affinity    bool
	stats       bool
}

func defaultConfig() config {
	return config{
		shards:      runtime.GOMAXPROCS(0),
		tick:        DefaultTick,
		wheelSize:   DefaultWheelSize,
		ringSize:    DefaultRingSize,
		transferCap: DefaultTransferCap,
		onPanic:     logPanic,
		stats:       true,
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

// WithWheelSize sets the slots per wheel level, rounded up to a power of
// two. The default is DefaultWheelSize; n must be in [2, MaxWheelSize].
// Larger wheels cascade less often, in larger batches, and cost more
// memory per shard (one 44-byte sentinel per slot per level).
func WithWheelSize(n int) Option {
	return func(c *config) error {
		if n < 2 || n > MaxWheelSize {
			return invalid("WithWheelSize", n, fmt.Sprintf("must be in [2, %d]", MaxWheelSize))
		}
		c.wheelSize = 1 << bits.Len(uint(n-1))
		return nil
	}
}

// WithRingSize sets how many timers a shard's storage holds when it first
// grows: the shard allocates nothing for timers until it gets its first
// one, then a block of n nodes (rounded up to a power of two, at least 64;
// 36 bytes each, plus 8 (4 on 32-bit platforms) once a closure timer lands
// in the block and 2 once a Handler timer does), and doubles its storage as
// it fills, in blocks of at most 2^18 nodes (or n, if larger). The default
// is DefaultRingSize; n must be in [1, MaxRingSize]. A larger first block
// saves a few early allocations for a shard that will surely hold many
// timers. (The option is named for the fixed rings that fed the shards
// before the queues became unbounded: new timers now wait in queues
// threaded through their own nodes, which never fill, so Schedule never
// waits for a shard.)
func WithRingSize(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxRingSize {
			return invalid("WithRingSize", n, fmt.Sprintf("must be in [1, %d]", MaxRingSize))
		}
		c.ringSize = n
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

// WithMaxPending limits the number of pending timers; beyond it Schedule
// returns ErrTooManyPending. 0, the default, means no limit other than
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

// WithExecutor sets where expired tasks run: the shard calls run(task) for
// each one. The default runs tasks inline on the shard goroutine, which is
// fastest for short tasks; a long task then delays every timer of its shard.
// run must not be nil.
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
// panics (or of an executor that does). The shard recovers and keeps
// running. The default logs the value and stack with log/slog at error
// level. h must not be nil. h runs on the shard goroutine and should not
// panic; if it does, its panic is recovered and dropped. Panics of tasks
// that an executor (WithExecutor) runs on other goroutines never reach the
// shard: that executor must recover them.
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
// no-op. A failure to pin is logged with log/slog and the shard runs
// unpinned. Pinned goroutines cost the Go scheduler a thread hand-off on
// every wake-up, and on the 2-core machine we measure on it changed neither
// CPU nor lateness beyond the noise (see the README): leave it off unless
// go run ./bench compare -affinity (or burst -affinity) shows a gain on
// your host.
func WithAffinity(on bool) Option {
	return func(c *config) error {
		c.affinity = on
		return nil
	}
}

// WithStats turns the latency histograms of Stats (tick lag, timer lateness,
// pass time, task run time) on or off; they are on by default. They cost one
// clock read per pass, per 64 tasks run and per sampled task; see the README
// for the measured overhead. Counters are kept either way.
func WithStats(on bool) Option {
	return func(c *config) error {
		c.stats = on
		return nil
	}
}

func logPanic(v any) {
	slog.Error("shardwheel: task panicked", "panic", v, "stack", string(debug.Stack()))
}

func (c *config) shardConfig(quota int64) shard.Config {
	return shard.Config{
		Tick:        c.tick,
		WheelSize:   c.wheelSize,
		FirstBlock:  c.ringSize,
		TransferCap: c.transferCap,
		Quota:       quota,
		Lanes:       runtime.GOMAXPROCS(0),
		Run:         c.executor,
		OnPanic:     c.onPanic,
		Stats:       c.stats,
	}
}

// checkMemory fails, naming the options, when the shards' fixed cost plus
// their first blocks of node storage cannot fit in the memory the process
// may use: physical memory where it is known (Linux), and the Go memory
// limit (GOMEMLIMIT, debug.SetMemoryLimit) when one is set.
func (c *config) checkMemory() error {
	lanes := runtime.GOMAXPROCS(0)
	perShard := uint64(shard.Footprint(c.wheelSize, lanes)) + uint64(c.ringSize)*pool.NodeBytes
	need := uint64(c.shards) * perShard
	avail := uint64(debug.SetMemoryLimit(-1))
	if ram := physicalMemory(); ram > 0 {
		avail = min(avail, ram)
	}
	if need <= avail {
		return nil
	}
	return fmt.Errorf("%w: WithShards(%d), WithWheelSize(%d) and WithRingSize(%d) need %d MiB "+
		"(%d KiB per shard at GOMAXPROCS %d, its first block of timers included), more than the %d MiB "+
		"this process may use", ErrInvalidOption, c.shards, c.wheelSize, c.ringSize, need>>20,
		perShard>>10, lanes, avail>>20)
}
