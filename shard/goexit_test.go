package shard

import (
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoexitHandsTheShardToANewGoroutine: a task that calls runtime.Goexit
// in the middle of its tick, inline or through an executor, is reported
// once (ErrGoexit) and counted in Panics; every other timer of that tick
// runs, never early (those after it in the slot's list, one with slack in
// the coarse slot of the same tick, a series that Goexits too), and later
// ones run on time. Inline (and through an executor that runs tasks in
// its run call) a new shard goroutine has taken over, which
// IsShardGoroutine and CancelWait's self-detection name; through a
// goroutine executor the shard goroutine never changed. The wheel is left
// well formed.
func TestGoexitHandsTheShardToANewGoroutine(t *testing.T) {
	for name, exec := range executors {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var reported []any
			sh, clock := startShardWith(t, func(c *Config) {
				if exec != nil {
					exec(c)
				}
				c.OnPanic = func(v any) {
					mu.Lock()
					reported = append(reported, v)
					mu.Unlock()
				}
			})
			require.Eventually(t, func() bool { return sh.gid.Load() != 0 }, waitFor, pollEvery)
			first := sh.gid.Load()
			// Due at tick 96: the first tick of a level-1 slot (the wheel
			// has 64 slots), where a timer with slack lands in a coarse
			// slot, run after the tick's level-0 slot.
			const due = 96 * testTick
			var ran, early atomic.Int64
			task := func() {
				if clock.Now() < due {
					early.Add(1)
				}
				ran.Add(1)
			}
			for i := range 4 {
				_, rej := sched(sh, uint64(i), due, task)
				require.Equal(t, Accepted, rej)
			}
			_, rej := sched(sh, 9, due, runtime.Goexit)
			require.Equal(t, Accepted, rej)
			for i := range 16 {
				_, rej := sched(sh, uint64(10+i), due, task)
				require.Equal(t, Accepted, rej)
			}
			_, rej = schedSlack(sh, 30, due-3*testTick, 6*testTick, task)
			require.Equal(t, Accepted, rej)
			var beats atomic.Int64
			series, rej := schedSeries(sh, 31, 40*testTick, SkipMissed, func() {
				if beats.Add(1) == 2 { // at tick 80
					runtime.Goexit()
				}
			})
			require.Equal(t, Accepted, rej)
			advanceUntil(t, clock, func() bool { return ran.Load() == 21 && beats.Load() >= 4 })
			assert.Zero(t, early.Load(), "ran early")
			require.Eventually(t, func() bool { return sh.Stats().Panics == 2 }, waitFor, pollEvery)
			require.True(t, sh.Cancel(series))

			mu.Lock()
			assert.Equal(t, []any{ErrGoexit, ErrGoexit}, reported)
			mu.Unlock()
			inline := name != "goroutine"
			if inline {
				// (Its token may be the old one's: the runtime reuses a
				// dead goroutine's g.)
				assert.NotEqual(t, first, sh.gid.Load(), "a new shard goroutine")
				assert.False(t, sh.IsShardGoroutine(first))
			} else {
				assert.Equal(t, first, sh.gid.Load(), "the same shard goroutine")
			}
			// The shard goroutine now is the one running inline tasks.
			self := make(chan [2]bool, 1)
			var ref atomic.Pointer[Ref]
			r, rej := sched(sh, 40, testTick, func() {
				r := ref.Load()
				for r == nil {
					r = ref.Load()
				}
				running, me := sh.running(*r)
				self <- [2]bool{running, me}
			})
			require.Equal(t, Accepted, rej)
			ref.Store(&r)
			var got [2]bool
			advanceUntil(t, clock, func() bool {
				select {
				case got = <-self:
					return true
				default:
					return false
				}
			})
			assert.Equal(t, [2]bool{true, true}, got, "CancelWait knows the task it is called from")

			sh.Close()
			<-sh.Exited()
			// The last goroutine let go of the wheel, or abandoned a pass
			// holding it, a run having ended after Close (see Quiet):
			// either way nobody touches it now.
			if !sh.holdForPass() {
				sh.heldBy()
			}
			sh.verify()
			assert.Zero(t, sh.Live())
		})
	}
}

// TestGoexitAfterCloseEndsTheShardGoroutine: a task that closes its shard
// (as Stop from a task does) and then calls runtime.Goexit ends the shard
// goroutine for good: no successor, exited closed once, and the timers
// after it in its tick are left to Drain, untouched.
func TestGoexitAfterCloseEndsTheShardGoroutine(t *testing.T) {
	var reported atomic.Int64
	sh, clock := startShardWith(t, func(c *Config) { c.OnPanic = func(any) { reported.Add(1) } })
	require.Eventually(t, func() bool { return sh.gid.Load() != 0 }, waitFor, pollEvery)
	first := sh.gid.Load()
	_, rej := sched(sh, 1, 2*testTick, func() {
		sh.Close()
		runtime.Goexit()
	})
	require.Equal(t, Accepted, rej)
	var after []Ref
	for i := range 8 {
		r, rej := sched(sh, uint64(2+i), 2*testTick, func() { t.Error("ran after its shard closed") })
		require.Equal(t, Accepted, rej)
		after = append(after, r)
	}
	advanceUntil(t, clock, sh.Closed)
	<-sh.Exited()
	assert.EqualValues(t, 1, reported.Load())
	assert.Equal(t, first, sh.gid.Load(), "no successor")
	claimed := map[Ref]bool{}
	sh.Drain(func(r Ref, _ uint64, _ time.Duration, _ Task) bool {
		claimed[r] = true
		return true
	})
	for _, r := range after {
		assert.True(t, claimed[r], "Drain claims the timers left in the tick")
	}
	clock.Advance(10 * testTick)
}

// TestNilPanicIsReportedUnderPanicnil: where GODEBUG=panicnil=1 makes
// recover return nil for panic(nil), a task that panics with nil is still
// reported, as a *runtime.PanicNilError, and counted, and not taken for a
// Goexit: the shard goroutine stays the same. The test runs itself again
// with that setting.
func TestNilPanicIsReportedUnderPanicnil(t *testing.T) {
	if os.Getenv("SHARDWHEEL_PANICNIL_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNilPanicIsReportedUnderPanicnil$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "SHARDWHEEL_PANICNIL_CHILD=1", "GODEBUG=panicnil=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestNilPanicIsReportedUnderPanicnil")
		return
	}
	var mu sync.Mutex
	var reported []any
	sh, clock := startShardWith(t, func(c *Config) {
		c.OnPanic = func(v any) {
			mu.Lock()
			reported = append(reported, v)
			mu.Unlock()
		}
	})
	require.Eventually(t, func() bool { return sh.gid.Load() != 0 }, waitFor, pollEvery)
	first := sh.gid.Load()
	_, rej := sched(sh, 1, testTick, func() { panic(nil) }) //nolint:govet // the point of the test
	require.Equal(t, Accepted, rej)
	var ran atomic.Bool
	_, rej = sched(sh, 2, 2*testTick, func() { ran.Store(true) })
	require.Equal(t, Accepted, rej)
	advanceUntil(t, clock, ran.Load)
	require.Eventually(t, func() bool { return sh.Stats().Panics == 1 }, waitFor, pollEvery)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reported, 1)
	assert.IsType(t, (*runtime.PanicNilError)(nil), reported[0])
	assert.Equal(t, first, sh.gid.Load(), "no Goexit: the same shard goroutine")
}
