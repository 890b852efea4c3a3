package shard

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Benchmarks of the cost claims of periodic timers, slack, CancelWait and
// the tracer. The wheel runs on a manual clock, so the work a benchmark
// reports (cascade moves, wake-ups) is exact, and its time is the CPU the
// shard spends, without sleeps.

// benchShard is a shard for benchmarks: default wheel, 1ms tick, manual
// clock, no pending limit, no latency histograms.
func benchShard(b testing.TB, mutate ...func(*Config)) (*Shard, *ManualClock) {
	clock := &ManualClock{}
	clock.Advance(time.Hour)
	cfg := Config{Tick: time.Millisecond, WheelSize: 512, FirstBlock: 1 << 10, TransferCap: 1 << 30,
		Clock: clock, Lanes: 1, OnPanic: func(v any) { panic(v) }}
	for _, m := range mutate {
		m(&cfg)
	}
	sh, err := New(cfg)
	require.NoError(b, err)
	playShardGoroutine(b, sh)
	return sh, clock
}

// passNow runs one pass of the shard goroutine, as it would when woken,
// and waits until the runner has run what it handed (settleRuns).
func passNow(sh *Shard) {
	if !sh.holdForPass() {
		panic("held")
	}
	sh.pass()
	sh.release()
	settleRuns(nil, sh)
}

// simulateIdleTimeouts schedules n timers of delay 60s (with slack),
// arriving evenly over 60s of the shard's clock, and plays the shard
// goroutine: it passes when the tick it sleeps until comes (its plan's, or
// an earlier one a timer's Schedule set: wakeFor), and sleeps otherwise.
// It returns the cascade work per timer (Stats.Refiled) and the wake-ups
// per second while the timers expire (passes from 60s to 120s, over 60s).
func simulateIdleTimeouts(b testing.TB, n int, slack time.Duration) (refiledPerTimer, wakeupsPerSec float64) {
	sh, clock := benchShard(b, func(c *Config) { c.FirstBlock = n })
	const span, delay = 60 * time.Second, 60 * time.Second
	origin := clock.Now()
	fired := 0
	task := Task{Func: func() { fired++ }}
	wakes := 0
	passAt := func(at time.Duration) {
		clock.Advance(at - clock.Now())
		passNow(sh)
		if at >= origin+delay && at < origin+delay+span {
			wakes++
		}
	}
	for next := 0; fired < n; {
		wake := time.Duration(math.MaxInt64)
		if until := sh.sleepUntil.Load(); until != math.MaxUint64 {
			wake = sh.tickTime(until)
		}
		if next < n {
			if arrival := origin + span*time.Duration(next)/time.Duration(n); arrival <= wake {
				clock.Advance(arrival - clock.Now())
				if _, rej := sh.Schedule(&Request{Now: arrival, Delay: delay, Slack: slack, Task: task}); rej != Accepted {
					b.Fatal(rej)
				}
				next++
				continue
			}
		}
		if wake == math.MaxInt64 {
			b.Fatalf("the shard sleeps with %d of %d timers not run", n-fired, n)
		}
		passAt(max(wake, clock.Now()))
	}
	return float64(sh.Stats().Refiled) / float64(n), float64(wakes) / span.Seconds()
}

// BenchmarkIdleTimeoutsSlack: a million 60s idle timeouts, exact and with
// 1s of slack. Reported: the cascade moves per timer and the shard's
// wake-ups per second while they expire; ns/op is the shard's CPU for the
// whole million (schedules and passes). Run it with -benchtime 1x.
func BenchmarkIdleTimeoutsSlack(b *testing.B) {
	const n = 1_000_000
	for _, slack := range []time.Duration{0, time.Second} {
		b.Run(fmt.Sprintf("slack=%v", slack), func(b *testing.B) {
			var refiled, wakeups float64
			for b.Loop() {
				refiled, wakeups = simulateIdleTimeouts(b, n, slack)
			}
			b.ReportMetric(refiled, "refiled/timer")
			b.ReportMetric(wakeups, "wakeups/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/timer")
		})
	}
}

// TestIdleTimeoutsSlackSaves is the benchmark's claim, at 100k timers: with
// a second of slack no timer cascades and the shard wakes a few times a
// second, where exact timers cascade once or more each and wake it at
// every tick.
func TestIdleTimeoutsSlackSaves(t *testing.T) {
	const n = 100_000
	exactRefiled, exactWakes := simulateIdleTimeouts(t, n, 0)
	slackRefiled, slackWakes := simulateIdleTimeouts(t, n, time.Second)
	t.Logf("exact: %.2f refiled/timer, %.0f wake-ups/s; 1s slack: %.2f refiled/timer, %.1f wake-ups/s",
		exactRefiled, exactWakes, slackRefiled, slackWakes)
	require.GreaterOrEqual(t, exactRefiled, 1.0)
	require.Zero(t, slackRefiled)
	require.Greater(t, exactWakes, 900.0)
	require.Less(t, slackWakes, 10.0)
}

// BenchmarkPassTracingOff: a pass with tracing off (pass, which asks
// trace.IsEnabled) against the same pass without the question (passBody):
// the tracer's cost when off. Each op passes one tick of a wheel holding
// timers due every few ticks and far away.
func BenchmarkPassTracingOff(b *testing.B) {
	for _, name := range []string{"pass", "passBody"} {
		b.Run(name, func(b *testing.B) {
			sh, clock := benchShard(b)
			for i := range 4096 {
				_, rej := sched(sh, uint64(i), time.Hour+time.Duration(i)*time.Millisecond, func() {})
				require.Equal(b, Accepted, rej)
			}
			run := sh.pass
			if name == "passBody" {
				run = sh.passBody
			}
			for b.Loop() {
				clock.Advance(time.Millisecond)
				if _, rej := sched(sh, 1, 3*time.Millisecond, func() {}); rej != Accepted {
					b.Fatal(rej)
				}
				sh.holdForPass()
				run()
				sh.release()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pass")
		})
	}
}

// BenchmarkSeriesRun: the cost of a heartbeat's run, as a periodic timer
// (one node, re-filed by the shard) and as the one-shot timer that re-arms
// itself in its task that it replaces; each op is a tick with one run. The
// wheel also holds 1024 timers an hour away, as a real one holds others:
// an empty wheel's pass skips work (the cascade search) that the
// self-re-arming timer would otherwise be credited with, since its node
// is out of the wheel while its task runs.
func BenchmarkSeriesRun(b *testing.B) {
	for _, kind := range []string{"every", "rearm-in-task"} {
		b.Run(kind, func(b *testing.B) {
			sh, clock := benchShard(b)
			for i := range 1024 {
				_, rej := sched(sh, uint64(i), time.Hour, func() {})
				require.Equal(b, Accepted, rej)
			}
			runs := 0
			if kind == "every" {
				_, rej := sh.Schedule(&Request{Now: clock.Now(), Task: Task{Func: func() { runs++ }},
					Period: time.Millisecond})
				require.Equal(b, Accepted, rej)
			} else {
				var beat func()
				beat = func() {
					runs++
					if _, rej := sched(sh, 1, time.Millisecond, beat); rej != Accepted {
						panic(rej)
					}
				}
				_, rej := sched(sh, 1, time.Millisecond, beat)
				require.Equal(b, Accepted, rej)
			}
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(time.Millisecond)
				passNow(sh)
			}
			require.Equal(b, b.N, runs)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(runs), "ns/run")
		})
	}
}

// BenchmarkExpire: the shard's cost to fire a timer and run (or hand over)
// its task, for timers nobody waits for, inline and with an executor:
// what publishing runs for CancelWait costs them. It uses only the API
// the shard had before CancelWait, so it runs on that tree too, for a
// same-machine comparison. Each op schedules 64 timers due at the next
// tick and passes that tick.
func BenchmarkExpire(b *testing.B) {
	for _, exec := range []bool{false, true} {
		b.Run(fmt.Sprintf("executor=%v", exec), func(b *testing.B) {
			sh, clock := benchShard(b, func(c *Config) {
				if exec {
					c.Run = func(f func()) { f() }
				}
			})
			f := func() {}
			h := &Handlers{}
			hid, _ := h.Add(func(uint64) {})
			sh.cfg.Handlers = h
			b.ReportAllocs()
			for b.Loop() {
				for i := range 64 {
					task := Task{Func: f}
					if i%2 == 1 {
						task = Task{Handler: hid}
					}
					if _, rej := sh.Schedule(&Request{Key: uint64(i), Now: clock.Now(), Delay: time.Millisecond, Task: task}); rej != Accepted {
						b.Fatal(rej)
					}
				}
				clock.Advance(time.Millisecond)
				passNow(sh)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/timer")
		})
	}
}

// BenchmarkCancelWait: CancelWait's own cost on a pending timer (a Cancel
// and a look for runs in flight) and on one that has run (the look only).
func BenchmarkCancelWait(b *testing.B) {
	ctx := context.Background()
	b.Run("pending", func(b *testing.B) {
		sh, clock := benchShard(b)
		for b.Loop() {
			r, _ := sched(sh, 1, time.Hour, func() {})
			if ok, _ := sh.CancelWait(ctx, r); !ok {
				b.Fatal("not cancelled")
			}
		}
		_ = clock
	})
	b.Run("ran", func(b *testing.B) {
		sh, clock := benchShard(b)
		r, _ := sched(sh, 1, 0, func() {})
		clock.Advance(time.Millisecond)
		passNow(sh)
		for b.Loop() {
			if ok, _ := sh.CancelWait(ctx, r); ok {
				b.Fatal("cancelled")
			}
		}
	})
}

// heldBurst schedules n timers due at the next tick on sh, whose executor
// appends the runs it is given to *held, and passes that tick: every run
// stays in flight until the caller runs what *held holds, as with an
// executor whose workers are all busy.
func heldBurst(b testing.TB, sh *Shard, clock *ManualClock, n int) {
	f := func() {}
	for i := range n {
		if _, rej := sched(sh, uint64(i), time.Millisecond, f); rej != Accepted {
			b.Fatal(rej)
		}
	}
	clock.Advance(time.Millisecond)
	passNow(sh)
}

// runHeld runs the runs an executor held, in the order it got them.
func runHeld(held *[]func()) {
	for _, f := range *held {
		f()
	}
	*held = (*held)[:0]
}

// BenchmarkExecutorBurst: the shard's cost to hand a burst of n timers,
// all due at the same tick, to an executor whose workers are busy (it
// holds every run until the burst is over), on a shard that has never
// handed over as many: ns/timer and B/timer are the pass's, per timer.
func BenchmarkExecutorBurst(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var bytes uint64
			var elapsed time.Duration
			for range b.N {
				held := make([]func(), 0, n)
				sh, clock := benchShard(b, func(c *Config) {
					c.FirstBlock = n
					c.Run = func(f func()) { held = append(held, f) }
				})
				f := func() {}
				for i := range n {
					if _, rej := sched(sh, uint64(i), time.Millisecond, f); rej != Accepted {
						b.Fatal(rej)
					}
				}
				clock.Advance(time.Millisecond)
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				start := time.Now()
				passNow(sh)
				elapsed += time.Since(start)
				runtime.ReadMemStats(&after)
				bytes += after.TotalAlloc - before.TotalAlloc
				require.Len(b, held, n)
				runHeld(&held)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*n), "ns/timer")
			b.ReportMetric(float64(bytes)/float64(b.N*n), "B/timer")
		})
	}
}

// BenchmarkCancelWaitAfterBurst: Schedule and CancelWait of a pending
// timer on a shard with an executor, after a burst of one run (a shard in
// steady state) and after one of 20000 runs in flight at once that have
// all returned, once the shard
// goroutine has passed for a second (its next look at what the burst
// left: the tables it grew through are unlinked) and for four (the
// burst's memory is given back): a burst must not leave CancelWait dearer
// for good.
func BenchmarkCancelWaitAfterBurst(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		burst int
		after time.Duration
	}{{1, time.Second}, {20000, time.Second}, {20000, 4 * time.Second}} {
		b.Run(fmt.Sprintf("burst=%d/after=%v", c.burst, c.after), func(b *testing.B) {
			var held []func()
			sh, clock := benchShard(b, func(cfg *Config) {
				cfg.FirstBlock = max(c.burst, 1024)
				cfg.Run = func(f func()) { held = append(held, f) }
			})
			heldBurst(b, sh, clock, c.burst)
			runHeld(&held)
			for range c.after / time.Second {
				clock.Advance(time.Second)
				passNow(sh)
			}
			b.ReportAllocs()
			for b.Loop() {
				r, _ := sched(sh, 1, time.Hour, func() {})
				if ok, _ := sh.CancelWait(ctx, r); !ok {
					b.Fatal("not cancelled")
				}
			}
		})
	}
}
