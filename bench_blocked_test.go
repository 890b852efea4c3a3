package shardwheel_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwheel/shardwheel"
)

// BenchmarkBesideABlockedTask measures what a task that blocks costs the
// other timers: two shards, a task on shard 1 blocked on a channel, then
// 20 goroutines scheduling 10 timers each, due 1ms on, 1ms apart, keyed to
// other keys of shard 1 (its runner's, behind the task) or AfterFunc
// (filed on whichever wheel their P has), once the task has blocked for
// 20ms. It reports how many of the 200 ran within a second (ran/200) and
// the p99 of how late they ran (late-p99-ms, over those that ran), with
// the default WithBlockedAfter (the tasks behind it move on) and with
// WithBlockedAfter(0) (they wait for it), beside time.AfterFunc in the
// same run:
//
//	go test -run '^$' -bench BesideABlockedTask -benchtime 5x -count 5 . |
//		benchstat -col /moveon -
func BenchmarkBesideABlockedTask(b *testing.B) {
	for _, kind := range []string{"keyed", "AfterFunc", "time.AfterFunc"} {
		for _, moveOn := range []string{"on", "off"} {
			if kind == "time.AfterFunc" && moveOn == "off" {
				continue
			}
			b.Run("kind="+kind+"/moveon="+moveOn, func(b *testing.B) {
				var late []time.Duration
				ran := 0
				for range b.N {
					l := besideABlockedTask(b, kind, moveOn == "on")
					ran += len(l)
					late = append(late, l...)
				}
				slices.Sort(late)
				b.ReportMetric(float64(ran)/float64(b.N), "ran/200")
				if len(late) > 0 {
					b.ReportMetric(float64(late[len(late)*99/100])/1e6, "late-p99-ms")
				}
			})
		}
	}
}

// besideABlockedTask runs one round of BenchmarkBesideABlockedTask and
// returns how late each timer that ran within a second ran.
func besideABlockedTask(b *testing.B, kind string, moveOn bool) []time.Duration {
	opts := []shardwheel.Option{shardwheel.WithShards(2)}
	if !moveOn {
		opts = append(opts, shardwheel.WithBlockedAfter(0))
	}
	s, err := shardwheel.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	release, started := make(chan struct{}), make(chan struct{})
	keys := keysFor(s, 1, 201)
	if _, err := s.AfterFunc(0, func() { close(started); <-release }, shardwheel.ByKey(keys[0])); err != nil {
		b.Fatal(err)
	}
	<-started
	// The timers come once the task has blocked for 20ms.
	time.Sleep(20 * time.Millisecond)
	healthy := keys[1:]
	var mu sync.Mutex
	var late []time.Duration
	var left atomic.Int64
	left.Store(200)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			for i := range 10 {
				due := time.Now().Add(time.Millisecond)
				f := func() {
					d := time.Since(due)
					mu.Lock()
					late = append(late, d)
					mu.Unlock()
					if left.Add(-1) == 0 {
						close(done)
					}
				}
				var err error
				switch kind {
				case "keyed":
					_, err = s.AfterFunc(time.Millisecond, f, shardwheel.ByKey(healthy[g*10+i]))
				case "AfterFunc":
					_, err = s.AfterFunc(time.Millisecond, f)
				default:
					time.AfterFunc(time.Millisecond, f)
				}
				if err != nil {
					b.Error(err)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	mu.Lock()
	out := slices.Clone(late)
	mu.Unlock()
	close(release)
	s.Stop()
	return out
}

// BenchmarkLatenessBesideASleepyKey measures the lateness of a proxy's
// timeouts while one key's task sleeps 50ms every 100ms: two shards, two
// goroutines scheduling 10k timers a second in all, keyed at random, due
// 5-20ms on; the sleepy key's timer re-schedules itself 100ms on each time
// it runs. Each op is a 2s window; late-p99-ms is the p99 of how late the
// other timers ran (from their deadline), with the default
// WithBlockedAfter (the tasks behind the sleepy one move on) and with
// WithBlockedAfter(0):
//
//	go test -run '^$' -bench LatenessBesideASleepyKey -benchtime 1x -count 5 . |
//		benchstat -col /moveon -
func BenchmarkLatenessBesideASleepyKey(b *testing.B) {
	for _, moveOn := range []string{"on", "off"} {
		b.Run("moveon="+moveOn, func(b *testing.B) {
			var late []time.Duration
			for range b.N {
				late = append(late, besideASleepyKey(b, moveOn == "on", 2*time.Second)...)
			}
			slices.Sort(late)
			if len(late) > 0 {
				b.ReportMetric(float64(late[len(late)*99/100])/1e6, "late-p99-ms")
				b.ReportMetric(float64(late[len(late)/2])/1e6, "late-p50-ms")
			}
		})
	}
}

// besideASleepyKey runs one window of BenchmarkLatenessBesideASleepyKey
// and returns how late each other timer ran.
func besideASleepyKey(b *testing.B, moveOn bool, window time.Duration) []time.Duration {
	opts := []shardwheel.Option{shardwheel.WithShards(2)}
	if !moveOn {
		opts = append(opts, shardwheel.WithBlockedAfter(0))
	}
	s, err := shardwheel.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	const sleepyKey = 1 << 40
	var sleepy func()
	sleepy = func() {
		time.Sleep(50 * time.Millisecond)
		if _, err := s.AfterFunc(50*time.Millisecond, sleepy, shardwheel.ByKey(sleepyKey)); err != nil && err != shardwheel.ErrStopped {
			b.Error(err)
		}
	}
	if _, err := s.AfterFunc(50*time.Millisecond, sleepy, shardwheel.ByKey(sleepyKey)); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var late []time.Duration
	var wg sync.WaitGroup
	end := time.Now().Add(window)
	for g := range 2 {
		wg.Go(func() {
			const perSecond = 5000
			start := time.Now()
			for i := 0; time.Now().Before(end); i++ {
				if ahead := time.Duration(i)*time.Second/perSecond - time.Since(start); ahead > 0 {
					time.Sleep(ahead)
				}
				d := time.Duration(5+(i*7+g)%16) * time.Millisecond
				due := time.Now().Add(d)
				_, err := s.AfterFunc(d, func() {
					l := time.Since(due)
					mu.Lock()
					late = append(late, l)
					mu.Unlock()
				}, shardwheel.ByKey(uint64(i*2+g)))
				if err != nil {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // the last timers run
	mu.Lock()
	out := slices.Clone(late)
	mu.Unlock()
	s.Stop()
	return out
}

// BenchmarkSmallTimersBesideCPUBoundTasks measures how a quick task shares
// the CPU with long ones: 4 goroutines spin (CPU hogs) while tasks that
// spin 2-20ms each are scheduled on the Scheduler, one every 5ms over 8
// keys, and small timers, due 1ms on, one every millisecond on each side,
// are scheduled on the Scheduler (AfterFunc) and on time.AfterFunc, side by
// side in the same 2s window. It reports each side's small timers'
// lateness (from their deadline), p50 and p99, in ms:
//
//	go test -run '^$' -bench SmallTimersBesideCPUBoundTasks -benchtime 1x -count 5 . | benchstat -
func BenchmarkSmallTimersBesideCPUBoundTasks(b *testing.B) {
	var lib, std []time.Duration
	for range b.N {
		l, r := besideCPUBoundTasks(b, 2*time.Second)
		lib, std = append(lib, l...), append(std, r...)
	}
	for _, side := range []struct {
		name string
		late []time.Duration
	}{{"s", lib}, {"time", std}} {
		slices.Sort(side.late)
		if len(side.late) > 0 {
			b.ReportMetric(float64(side.late[len(side.late)/2])/1e6, side.name+"-p50-ms")
			b.ReportMetric(float64(side.late[len(side.late)*99/100])/1e6, side.name+"-p99-ms")
		}
	}
}

// spinFor keeps the CPU busy for d.
func spinFor(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// besideCPUBoundTasks runs one window of
// BenchmarkSmallTimersBesideCPUBoundTasks and returns how late the small
// timers ran on the Scheduler and on time.AfterFunc.
func besideCPUBoundTasks(b *testing.B, window time.Duration) (lib, std []time.Duration) {
	s, err := shardwheel.New()
	if err != nil {
		b.Fatal(err)
	}
	var quit atomic.Bool
	var hogs sync.WaitGroup
	for range 4 {
		hogs.Go(func() {
			for !quit.Load() {
				spinFor(100 * time.Microsecond)
			}
		})
	}
	var mu sync.Mutex
	record := func(to *[]time.Duration, due time.Time) func() {
		return func() {
			l := time.Since(due)
			mu.Lock()
			*to = append(*to, l)
			mu.Unlock()
		}
	}
	end := time.Now().Add(window)
	var load sync.WaitGroup
	load.Go(func() { // the long tasks
		for i := 0; time.Now().Before(end); i++ {
			d := time.Duration(2+i*7%19) * time.Millisecond
			if _, err := s.AfterFunc(time.Millisecond, func() { spinFor(d) }, shardwheel.ByKey(uint64(i%8))); err != nil {
				b.Error(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	load.Go(func() { // the small timers, both sides
		for time.Now().Before(end) {
			due := time.Now().Add(time.Millisecond)
			if _, err := s.AfterFunc(time.Millisecond, record(&lib, due)); err != nil {
				b.Error(err)
			}
			time.AfterFunc(time.Millisecond, record(&std, due))
			time.Sleep(time.Millisecond)
		}
	})
	load.Wait()
	quit.Store(true)
	hogs.Wait()
	s.Stop() // the tasks handed out return first
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(lib), slices.Clone(std)
}
