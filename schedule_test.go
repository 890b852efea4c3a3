package shardwheel_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// verb is one way to schedule: a closure or a Handler, once or
// periodically. arg is the Handler's argument (ignored by closures); ran
// is called with the shard the task ran on.
type verb struct {
	name     string
	series   bool
	schedule func(s *shardwheel.Scheduler, arg uint64, d time.Duration, ran func(int), opts ...shardwheel.TimerOption) (shardwheel.Timer, error)
}

// verbs are the four ways to schedule.
var verbs = []verb{
	{"Scheduler.AfterFunc", false, func(s *shardwheel.Scheduler, _ uint64, d time.Duration, ran func(int), opts ...shardwheel.TimerOption) (shardwheel.Timer, error) {
		return s.AfterFunc(d, func() { ran(shardwheel.RunningShard(s)) }, opts...)
	}},
	{"Scheduler.Every", true, func(s *shardwheel.Scheduler, _ uint64, d time.Duration, ran func(int), opts ...shardwheel.TimerOption) (shardwheel.Timer, error) {
		return s.Every(d, func() { ran(shardwheel.RunningShard(s)) }, opts...)
	}},
	{"Handler.AfterFunc", false, handlerVerb(shardwheel.Handler.AfterFunc)},
	{"Handler.Every", true, handlerVerb(shardwheel.Handler.Every)},
}

// handlerVerb is a verb of a Handler that calls ran with its shard when it
// runs with its argument.
func handlerVerb(call func(shardwheel.Handler, uint64, time.Duration, ...shardwheel.TimerOption) (shardwheel.Timer, error)) func(*shardwheel.Scheduler, uint64, time.Duration, func(int), ...shardwheel.TimerOption) (shardwheel.Timer, error) {
	return func(s *shardwheel.Scheduler, arg uint64, d time.Duration, ran func(int), opts ...shardwheel.TimerOption) (shardwheel.Timer, error) {
		h, err := s.NewHandler(func(got uint64) {
			if got == arg {
				ran(shardwheel.RunningShard(s))
			}
		})
		if err != nil {
			return shardwheel.Timer{}, err
		}
		return call(h, arg, d, opts...)
	}
}

// TestEveryVerbWithEveryOption: each verb with each combination of the
// options that apply to it runs its task, never early, on the shard its
// placement names (the caller's P's without ByKey, the key's with it), and
// its handle carries the key.
func TestEveryVerbWithEveryOption(t *testing.T) {
	withGOMAXPROCS(1, func() { // one P: the caller's shard is shard 0
		s := newScheduler(t, shardwheel.WithShards(4))
		key := keysFor(s, 3, 1)[0] // routes to shard 3
		for _, v := range verbs {
			var combos = map[string][]shardwheel.TimerOption{
				"none":       nil,
				"ByKey":      {shardwheel.ByKey(key)},
				"zero value": {{}},
			}
			if v.series {
				combos["OnMissed"] = []shardwheel.TimerOption{shardwheel.OnMissed(shardwheel.BurstMissed)}
				combos["ByKey, OnMissed"] = []shardwheel.TimerOption{shardwheel.ByKey(key), shardwheel.OnMissed(shardwheel.DelayMissed)}
			} else {
				combos["Slack"] = []shardwheel.TimerOption{shardwheel.Slack(5 * time.Millisecond)}
				combos["ByKey, Slack"] = []shardwheel.TimerOption{shardwheel.ByKey(key), shardwheel.Slack(5 * time.Millisecond)}
			}
			for name, opts := range combos {
				t.Run(v.name+"/"+name, func(t *testing.T) {
					byKey := len(opts) > 0 && opts[0] == shardwheel.ByKey(key)
					const delay = 3 * time.Millisecond
					shards := make(chan int, 64)
					start := time.Now()
					var at atomic.Int64
					tm, err := v.schedule(s, key, delay, func(sh int) {
						at.CompareAndSwap(0, int64(time.Since(start)))
						select {
						case shards <- sh:
						default:
						}
					}, opts...)
					require.NoError(t, err)
					want := 0
					if byKey {
						want = 3
					}
					select {
					case got := <-shards:
						assert.Equal(t, want, got, "the shard the task ran on")
					case <-time.After(waitFor):
						t.Fatal("the task never ran")
					}
					assert.GreaterOrEqual(t, time.Duration(at.Load()), delay, "ran early")
					switch {
					case v.name[:7] == "Handler":
						assert.Equal(t, key, tm.Key(), "a Handler's timer carries its argument")
					case byKey:
						assert.Equal(t, key, tm.Key())
					default:
						assert.Zero(t, tm.Key())
					}
					if v.series {
						assert.True(t, tm.Cancel(), "the series lives until cancelled")
					}
				})
			}
		}
	})
}

// TestTimerOptionsThatDoNotApply: a combination that does not make sense
// fails with an error that wraps ErrInvalidOption and names the verb, the
// option and its value, and schedules nothing.
func TestTimerOptionsThatDoNotApply(t *testing.T) {
	s := newScheduler(t)
	h, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	tests := []struct {
		name string
		call func() (shardwheel.Timer, error)
		says []string
	}{
		{"AfterFunc with OnMissed", func() (shardwheel.Timer, error) {
			return s.AfterFunc(time.Hour, noop, shardwheel.OnMissed(shardwheel.BurstMissed))
		}, []string{"AfterFunc", "OnMissed(BurstMissed)", "Every"}},
		{"Every with Slack", func() (shardwheel.Timer, error) {
			return s.Every(time.Hour, noop, shardwheel.Slack(time.Second))
		}, []string{"Every", "Slack(1s)"}},
		{"Every with an unknown policy", func() (shardwheel.Timer, error) {
			return s.Every(time.Hour, noop, shardwheel.OnMissed(shardwheel.MissedPolicy(9)))
		}, []string{"Every", "OnMissed(MissedPolicy(9))", "not a policy"}},
		{"Handler.AfterFunc with OnMissed", func() (shardwheel.Timer, error) {
			return h.AfterFunc(1, time.Hour, shardwheel.OnMissed(shardwheel.SkipMissed))
		}, []string{"Handler.AfterFunc", "OnMissed(SkipMissed)"}},
		{"Handler.Every with Slack", func() (shardwheel.Timer, error) {
			return h.Every(1, time.Hour, shardwheel.Slack(time.Millisecond))
		}, []string{"Handler.Every", "Slack(1ms)"}},
		{"Handler.AfterFunc with another key", func() (shardwheel.Timer, error) {
			return h.AfterFunc(1, time.Hour, shardwheel.ByKey(2))
		}, []string{"Handler.AfterFunc(1, ...)", "ByKey(2)", "argument"}},
		{"Handler.Every with another key", func() (shardwheel.Timer, error) {
			return h.Every(1, time.Hour, shardwheel.ByKey(2))
		}, []string{"Handler.Every(1, ...)", "ByKey(2)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.Stats().Total.Scheduled
			tm, err := tt.call()
			require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
			for _, want := range tt.says {
				assert.Contains(t, err.Error(), want)
			}
			assert.Equal(t, shardwheel.Timer{}, tm)
			assert.Equal(t, before, s.Stats().Total.Scheduled, "nothing scheduled")
			assert.Zero(t, s.Pending())
		})
	}
}

// TestDefaultSlackOnASeries: Slack at or below 0 is the default, no
// slack, which a series accepts (a computed option need not be left out).
func TestDefaultSlackOnASeries(t *testing.T) {
	s := newScheduler(t)
	for _, d := range []time.Duration{0, -time.Second} {
		tm, err := s.Every(time.Hour, noop, shardwheel.Slack(d))
		require.NoError(t, err, "Slack(%v)", d)
		assert.True(t, tm.Cancel())
	}
}

// TestLaterTimerOptionOverrides: options apply in order, a later one of a
// kind overriding an earlier one.
func TestLaterTimerOptionOverrides(t *testing.T) {
	withGOMAXPROCS(1, func() {
		s := newScheduler(t, shardwheel.WithShards(4))
		k2, k3 := keysFor(s, 2, 1)[0], keysFor(s, 3, 1)[0]
		tm, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(k2), shardwheel.ByKey(k3))
		require.NoError(t, err)
		assert.Equal(t, k3, tm.Key())
		ran := make(chan int, 1)
		_, err = s.AfterFunc(0, func() { ran <- shardwheel.RunningShard(s) }, shardwheel.ByKey(k2), shardwheel.ByKey(k3))
		require.NoError(t, err)
		select {
		case got := <-ran:
			assert.Equal(t, 3, got)
		case <-time.After(waitFor):
			t.Fatal("never ran")
		}
		series, err := s.Every(time.Hour, noop, shardwheel.OnMissed(shardwheel.MissedPolicy(9)), shardwheel.OnMissed(shardwheel.SkipMissed))
		assert.ErrorIs(t, err, shardwheel.ErrInvalidOption, "a bad option fails the call even when a later one overrides it")
		assert.Equal(t, shardwheel.Timer{}, series)
	})
}

// TestVerbsAllocateNothing: in steady state no verb allocates with any
// combination of options, but what the caller's closure does (made once
// here): a series' record is the one its node kept from an ended series,
// and a plan's state an ended plan's.
func TestVerbsAllocateNothing(t *testing.T) {
	s := newScheduler(t)
	h, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	combos := map[string][]shardwheel.TimerOption{
		"none":         nil,
		"ByKey":        {shardwheel.ByKey(7)},
		"Slack":        {shardwheel.Slack(time.Second)},
		"ByKey, Slack": {shardwheel.ByKey(7), shardwheel.Slack(time.Second)},
	}
	seriesCombos := map[string][]shardwheel.TimerOption{
		"none":            nil,
		"ByKey":           {shardwheel.ByKey(7)},
		"OnMissed":        {shardwheel.OnMissed(shardwheel.BurstMissed)},
		"ByKey, OnMissed": {shardwheel.ByKey(7), shardwheel.OnMissed(shardwheel.DelayMissed)},
	}
	// Enough calls to span many ticks: a cancelled timer's node (and a
	// series' record with it) comes back when a sweep frees it, at the
	// sweep's pace, which a busy machine slows.
	measure := func(t *testing.T, schedule func() (shardwheel.Timer, error)) float64 {
		for range 20000 { // warm the arenas, the run records and the nodes' series records
			tm, err := schedule()
			require.NoError(t, err)
			require.True(t, tm.Cancel())
		}
		return testing.AllocsPerRun(20000, func() {
			tm, err := schedule()
			if err != nil || !tm.Cancel() {
				t.Fatal("schedule or cancel failed")
			}
		})
	}
	for name, opts := range combos {
		t.Run("Scheduler.AfterFunc/"+name, func(t *testing.T) {
			assert.Zero(t, measure(t, func() (shardwheel.Timer, error) { return s.AfterFunc(time.Hour, noop, opts...) }))
		})
		t.Run("Handler.AfterFunc/"+name, func(t *testing.T) {
			assert.Zero(t, measure(t, func() (shardwheel.Timer, error) { return h.AfterFunc(7, time.Hour, opts...) }))
		})
	}
	// The options passed literally, as a caller writes them: the variadic
	// slice stays on the caller's stack.
	t.Run("literal options", func(t *testing.T) {
		assert.Zero(t, measure(t, func() (shardwheel.Timer, error) {
			return s.AfterFunc(time.Hour, noop, shardwheel.ByKey(7), shardwheel.Slack(time.Second))
		}))
	})
	// A series' record comes back with its node. On a Scheduler of one
	// shard every Cancel here takes its series back at once; on two, a
	// series ByKey files on the other shard waits for that shard's sweep,
	// and a producer that outpaces it takes fresh nodes, which have no
	// record yet (the race detector's pace on a busy host did that for
	// every call of CI's run).
	s1 := newScheduler(t, shardwheel.WithShards(1))
	h1, err := s1.NewHandler(func(uint64) {})
	require.NoError(t, err)
	for name, opts := range seriesCombos {
		t.Run("Scheduler.Every/"+name, func(t *testing.T) {
			assert.Zero(t, measure(t, func() (shardwheel.Timer, error) { return s1.Every(time.Hour, noop, opts...) }))
		})
		t.Run("Handler.Every/"+name, func(t *testing.T) {
			assert.Zero(t, measure(t, func() (shardwheel.Timer, error) { return h1.Every(7, time.Hour, opts...) }))
		})
	}
	plan := planFunc(func(prev time.Time) time.Time { return prev.Add(time.Hour) })
	for name, opts := range map[string][]shardwheel.TimerOption{"none": nil, "ByKey": {shardwheel.ByKey(7)}} {
		t.Run("Scheduler.OnPlan/"+name, func(t *testing.T) {
			if raceEnabled {
				t.Skip("plans' states are kept in a sync.Pool, which the race detector makes drop some")
			}
			assert.Zero(t, measure(t, func() (shardwheel.Timer, error) { return s1.OnPlan(plan, noop, opts...) }))
		})
	}
}

// ExampleByKey: the tasks of one key run one at a time, in deadline
// order, on the key's shard: a connection's events need no lock of their
// own against each other.
func ExampleByKey() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	const conn = 42
	done := make(chan struct{})
	var log []string // touched only by conn's tasks, one at a time
	for _, d := range []time.Duration{30, 10, 20} {
		_, err := s.AfterFunc(d*time.Millisecond, func() {
			log = append(log, fmt.Sprint(d*time.Millisecond))
			if len(log) == 3 {
				close(done)
			}
		}, shardwheel.ByKey(conn))
		if err != nil {
			panic(err)
		}
	}
	<-done
	fmt.Println(log)
	// Output:
	// [10ms 20ms 30ms]
}
