package shard

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A task that blocks for longer than TakeoverAfter hands its wheel to a new
// goroutine, which runs the wheel's other timers on time meanwhile (never
// early); the blocked task's key is held back: its later timers wait, and
// run in deadline order once it returns. CancelWait on the blocked timer
// waits for it; the retired goroutine's panic is reported; Stats name the
// blocked task. Inline and with an executor that runs tasks inline.
func TestBlockedTaskHandsItsWheelOver(t *testing.T) {
	for name, exec := range map[string]func(*Config){"inline": nil, "sync": executors["sync"]} {
		t.Run(name, func(t *testing.T) {
			var panics atomic.Int64
			sh, clock := startShardWith(t, func(c *Config) {
				if exec != nil {
					exec(c)
				}
				c.TakeoverAfter = 4 * testTick
				c.OnPanic = func(v any) { panics.Add(1) }
				c.Group = &Group{Route: func(uint64) int { return 0 }}
				c.Group.Shards = []*Shard{nil} // set below
			})
			sh.cfg.Group.Shards[0] = sh
			release := make(chan struct{})
			blocked := make(chan struct{})
			var order []string
			var mu sync.Mutex
			note := func(s string) {
				mu.Lock()
				order = append(order, s)
				mu.Unlock()
			}
			routed := func(key uint64, delay time.Duration, f func()) Ref {
				r, rej := sh.Schedule(&Request{Key: key, Now: sh.clock.Now(), Delay: delay, Routed: true, Task: Task{Func: f}})
				require.Equal(t, Accepted, rej)
				return r
			}
			blocker := routed(7, testTick, func() {
				close(blocked)
				<-release
				note("blocker")
				panic("after the block")
			})
			advanceUntil(t, clock, func() bool {
				select {
				case <-blocked:
					return true
				default:
					return false
				}
			})
			// The key's later timers, and others, due while it blocks.
			routed(7, 2*testTick, func() { note("key 7 first") })
			routed(7, 3*testTick, func() { note("key 7 second") })
			var others atomic.Int64
			var early atomic.Int64
			for i := range 10 {
				due := sh.clock.Now() + time.Duration(i+1)*testTick
				routed(uint64(100+i), time.Duration(i+1)*testTick, func() {
					if sh.clock.Now() < due {
						early.Add(1)
					}
					others.Add(1)
				})
			}
			advanceUntil(t, clock, func() bool { return others.Load() == 10 })
			assert.Zero(t, early.Load(), "never early")
			st := sh.Stats()
			assert.EqualValues(t, 1, st.Takeovers)
			require.Len(t, st.Blocked, 1)
			assert.EqualValues(t, 7, st.Blocked[0].Key)
			assert.True(t, st.Blocked[0].Keyed)
			assert.Contains(t, st.Blocked[0].Func, "TestBlockedTaskHandsItsWheelOver")
			mu.Lock()
			assert.Empty(t, order, "key 7's timers wait for its blocked task")
			mu.Unlock()
			assert.True(t, sh.Pending(blocker) == false, "the blocked timer has fired")

			waited := make(chan error, 1)
			go func() {
				_, err := sh.CancelWait(context.Background(), blocker)
				waited <- err
			}()
			select {
			case <-waited:
				t.Fatal("CancelWait returned while the blocked task runs")
			case <-time.After(20 * time.Millisecond):
			}
			close(release)
			require.NoError(t, <-waited)
			advanceUntil(t, clock, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(order) == 3
			})
			mu.Lock()
			assert.Equal(t, []string{"blocker", "key 7 first", "key 7 second"}, order)
			mu.Unlock()
			require.Eventually(t, func() bool { return panics.Load() == 1 && sh.Stats().Panics == 1 }, waitFor, pollEvery)
			require.Eventually(t, func() bool { return len(sh.Stats().Blocked) == 0 }, waitFor, pollEvery)
			assert.Zero(t, sh.Live())
		})
	}
}

// Takeovers race the blocked task's return, round after round: the
// watchdog's look and the task's return come together, so the retired
// goroutine often fails its CAS while the takeover is still recording the
// run. Every timer runs once, the shard's goroutines are counted out
// exactly once (exited closes once, as the cleanup's Close shows), and
// nothing is left.
func TestTakeoverRacesTheTaskReturning(t *testing.T) {
	sh, clock := startShardWith(t, func(c *Config) { c.TakeoverAfter = testTick })
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	var ran atomic.Int64
	for round := range rounds {
		started, release := make(chan struct{}), make(chan struct{})
		_, rej := sh.Schedule(&Request{Now: sh.clock.Now(), Delay: testTick, Task: Task{Func: func() {
			close(started)
			<-release
			ran.Add(1)
		}}})
		require.Equal(t, Accepted, rej)
		advanceUntil(t, clock, func() bool {
			select {
			case <-started:
				return true
			default:
				return false
			}
		})
		go func() {
			if round%2 == 0 {
				time.Sleep(time.Duration(round%7) * 10 * time.Microsecond)
			}
			close(release)
		}()
		clock.Advance(2 * testTick) // the watchdog's two looks
		want := int64(round + 1)
		advanceUntil(t, clock, func() bool { return ran.Load() == want && len(sh.Stats().Blocked) == 0 })
	}
	st := sh.Stats()
	t.Logf("%d rounds, %d taken over", rounds, st.Takeovers)
	assert.Zero(t, sh.Live())
	assert.Zero(t, st.Panics)
}

// Once a takeover has the wheel, the watchdog takes no other until a task
// of the successor's blocks: while the successor is idle, or between its
// tasks, inTask reads takenOver, which is no task.
func TestSuccessorBetweenTasksIsNotTakenOver(t *testing.T) {
	sh, clock := startShardWith(t, func(c *Config) { c.TakeoverAfter = testTick })
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	_, rej := sh.Schedule(&Request{Now: sh.clock.Now(), Delay: testTick, Task: Task{Func: func() {
		close(started)
		<-release
	}}})
	require.Equal(t, Accepted, rej)
	advanceUntil(t, clock, func() bool { return sh.Stats().Takeovers == 1 })
	var ran atomic.Int64
	for i := range 50 {
		// Short tasks arm the watchdog; the clock moves past its bound
		// between them.
		_, rej := sh.Schedule(&Request{Now: sh.clock.Now(), Delay: testTick, Task: Task{Func: func() { ran.Add(1) }}})
		require.Equal(t, Accepted, rej)
		want := int64(i + 1)
		advanceUntil(t, clock, func() bool { return ran.Load() == want })
		clock.Advance(3 * testTick)
	}
	assert.EqualValues(t, 1, sh.Stats().Takeovers, "one task blocked")
}

// TestALosingTakeoverLeavesTheWinnersRecord: two watchdog looks at one
// task may both try to take its wheel; the retired goroutine waits on the
// record of the one whose CAS on inTask won, so the other may neither
// replace it (the retired goroutine would wait forever on a record nobody
// closes: Stop hung so in a soak) nor, having lost its CAS, leave its own.
func TestALosingTakeoverLeavesTheWinnersRecord(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TakeoverAfter = testTick })
	sh := h.sh
	l := sh.life.Load()
	winner := &blockedRun{}
	require.True(t, l.claim(winner), "the winning look's record")
	sh.inTask.Store(5) // task 5 in progress
	assert.False(t, sh.takeover(5), "a second look at task 5 gives up")
	assert.Same(t, winner, l.rec.Load(), "the winner's record stays")
	assert.EqualValues(t, 5, sh.inTask.Load(), "and the task is not taken over by it")
	assert.Zero(t, sh.cfg.Blocked.Load(), "nor counted")

	l.rec.Store(nil)
	assert.False(t, sh.takeover(4), "task 4 has returned")
	assert.Nil(t, l.rec.Load(), "a look that lost its CAS leaves no record")
	assert.Zero(t, sh.cfg.Blocked.Load())
	sh.inTask.Store(0)
}
